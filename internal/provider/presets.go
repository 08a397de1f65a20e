package provider

import (
	"slices"

	"github.com/oncehook/oncehook/internal/ledger"
)

// Preset names: senders whose scheme is a VerifySpec fixed here. docs/providers.md
// lists what each one signs, where its identity is and how it retries.
const (
	PresetSlack    = "slack"
	PresetTwilio   = "twilio"
	PresetPaddle   = "paddle"
	PresetSquare   = "square"
	PresetTypeform = "typeform"
	PresetCalendly = "calendly"
	PresetIntercom = "intercom"
	PresetZendesk  = "zendesk"
	PresetHubSpot  = "hubspot"
	PresetMailgun  = "mailgun"
	PresetSendGrid = "sendgrid"
	PresetPostmark = "postmark"
	PresetLinear   = "linear"
	PresetGitLab   = "gitlab"
	PresetDiscord  = "discord"
	PresetZoom     = "zoom"
	PresetResend   = "resend" // Standard Webhooks, sent through Svix
	PresetClerk    = "clerk"  // Standard Webhooks, sent through Svix
)

var (
	body      = ledger.SignedPart{Kind: ledger.PartBody}
	timestamp = ledger.SignedPart{Kind: ledger.PartTimestamp}
	dot       = literal(".")
)

func literal(s string) ledger.SignedPart {
	return ledger.SignedPart{Kind: ledger.PartLiteral, Value: s}
}

func pointer(p string) ledger.SignedPart {
	return ledger.SignedPart{Kind: ledger.PartPointer, Value: p}
}

func hmacHex(header string, alg string, signed ...ledger.SignedPart) ledger.VerifySpec {
	return ledger.VerifySpec{Kind: ledger.VerifyKindHMAC, Algorithm: alg, Encoding: "hex",
		Signature: ledger.SignatureSpec{Header: header, Format: ledger.SignaturePlain}, Signed: signed}
}

func hmacBase64(header string, alg string, signed ...ledger.SignedPart) ledger.VerifySpec {
	s := hmacHex(header, alg, signed...)
	s.Encoding = "base64"
	return s
}

func prefixed(s ledger.VerifySpec, prefix string) ledger.VerifySpec {
	s.Signature.Format, s.Signature.Prefix = ledger.SignaturePrefix, prefix
	return s
}

// presets builds every preset afresh, so a caller may change its copy.
var presets = map[string]func() ledger.VerifySpec{
	PresetSlack: func() ledger.VerifySpec {
		s := prefixed(hmacHex("X-Slack-Signature", "sha256", literal("v0:"), timestamp, literal(":"), body), "v0=")
		s.Timestamp = ledger.TimestampSpec{Header: "X-Slack-Request-Timestamp"}
		// Events API deliveries carry event_id; slash commands and interactivity carry
		// only a trigger_id.
		s.ID = ledger.IdentitySpec{Composite: []string{"/event_id", "/trigger_id"}}
		s.Type = ledger.TypeSpec{Pointer: "/event/type"}
		s.Form, s.FormFields, s.Handshake, s.Keep = "payload", true, ledger.HandshakeSlack, []string{"X-Slack-Retry-Num", "X-Slack-Retry-Reason"}
		return s
	},
	PresetTwilio: func() ledger.VerifySpec {
		s := hmacBase64("X-Twilio-Signature", "sha1", ledger.SignedPart{Kind: ledger.PartURL}, ledger.SignedPart{Kind: ledger.PartForm})
		s.ID = ledger.IdentitySpec{Header: "I-Twilio-Idempotency-Token"}
		s.Form, s.Keep = "*", []string{"I-Twilio-Idempotency-Token"}
		return s
	},
	PresetPaddle: func() ledger.VerifySpec {
		s := hmacHex("Paddle-Signature", "sha256", timestamp, literal(":"), body)
		s.Signature = ledger.SignatureSpec{Header: "Paddle-Signature", Format: ledger.SignatureList, Separator: ";", Keys: []string{"h1"}}
		s.Timestamp = ledger.TimestampSpec{Signature: "ts"}
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/event_id"}, ledger.TypeSpec{Pointer: "/event_type"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/occurred_at", Format: ledger.TimeRFC3339}
		return s
	},
	PresetSquare: func() ledger.VerifySpec {
		s := hmacBase64("X-Square-Hmacsha256-Signature", "sha256", ledger.SignedPart{Kind: ledger.PartURL}, body)
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/event_id"}, ledger.TypeSpec{Pointer: "/type"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/created_at", Format: ledger.TimeRFC3339}
		return s
	},
	PresetTypeform: func() ledger.VerifySpec {
		s := prefixed(hmacBase64("Typeform-Signature", "sha256", body), "sha256=")
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/event_id"}, ledger.TypeSpec{Pointer: "/event_type"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/form_response/submitted_at", Format: ledger.TimeRFC3339}
		return s
	},
	PresetCalendly: func() ledger.VerifySpec {
		s := hmacHex("Calendly-Webhook-Signature", "sha256", timestamp, dot, body)
		s.Signature = ledger.SignatureSpec{Header: "Calendly-Webhook-Signature", Format: ledger.SignatureList, Keys: []string{"v1"}}
		s.Timestamp = ledger.TimestampSpec{Signature: "t"}
		s.ID = ledger.IdentitySpec{Composite: []string{"/event", "/payload/uri", "/created_at"}}
		s.Type = ledger.TypeSpec{Pointer: "/event"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/created_at", Format: ledger.TimeRFC3339}
		return s
	},
	PresetIntercom: func() ledger.VerifySpec {
		s := prefixed(hmacHex("X-Hub-Signature", "sha1", body), "sha1=")
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/id"}, ledger.TypeSpec{Pointer: "/topic"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/created_at"}
		return s
	},
	PresetZendesk: func() ledger.VerifySpec {
		s := hmacBase64("X-Zendesk-Webhook-Signature", "sha256", timestamp, body)
		s.Timestamp = ledger.TimestampSpec{Header: "X-Zendesk-Webhook-Signature-Timestamp", Format: ledger.TimeRFC3339}
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/id"}, ledger.TypeSpec{Pointer: "/type"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/time", Format: ledger.TimeRFC3339}
		s.Keep = []string{"X-Zendesk-Webhook-Id", "X-Zendesk-Webhook-Invocation-Id"}
		return s
	},
	PresetHubSpot: func() ledger.VerifySpec {
		s := hmacBase64("X-HubSpot-Signature-v3", "sha256",
			ledger.SignedPart{Kind: ledger.PartMethod}, ledger.SignedPart{Kind: ledger.PartURL}, body, timestamp)
		s.Timestamp = ledger.TimestampSpec{Header: "X-HubSpot-Request-Timestamp", Format: ledger.TimeUnixMS}
		// HubSpot posts a list of up to 100 events; the first one's id (a number, so a
		// composite of one) names the batch.
		s.Array = true
		s.ID, s.Type = ledger.IdentitySpec{Composite: []string{"/0/eventId"}}, ledger.TypeSpec{Pointer: "/0/subscriptionType"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/0/occurredAt", Format: ledger.TimeUnixMS}
		return s
	},
	PresetMailgun: func() ledger.VerifySpec {
		s := hmacHex("", "sha256", timestamp, pointer("/signature/token"))
		s.Signature = ledger.SignatureSpec{Pointer: "/signature/signature", Format: ledger.SignaturePlain}
		s.Timestamp = ledger.TimestampSpec{Pointer: "/signature/timestamp"}
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/event-data/id"}, ledger.TypeSpec{Pointer: "/event-data/event"}
		return s
	},
	PresetSendGrid: func() ledger.VerifySpec {
		s := hmacBase64("X-Twilio-Email-Event-Webhook-Signature", "", timestamp, body)
		s.Kind = ledger.VerifyKindECDSA
		s.Timestamp = ledger.TimestampSpec{Header: "X-Twilio-Email-Event-Webhook-Timestamp"}
		// SendGrid posts a list of events; the first one's id names the batch.
		s.Array = true
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/0/sg_event_id"}, ledger.TypeSpec{Pointer: "/0/event"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/0/timestamp"}
		return s
	},
	PresetPostmark: func() ledger.VerifySpec {
		return ledger.VerifySpec{Kind: ledger.VerifyKindBasic,
			ID: ledger.IdentitySpec{Composite: []string{"/RecordType", "/MessageID", "/ID",
				"/DeliveredAt", "/BouncedAt", "/ReceivedAt", "/ChangedAt"}},
			Type: ledger.TypeSpec{Pointer: "/RecordType"}}
	},
	PresetLinear: func() ledger.VerifySpec {
		s := hmacHex("Linear-Signature", "sha256", body)
		s.Timestamp = ledger.TimestampSpec{Pointer: "/webhookTimestamp", Format: ledger.TimeUnixMS}
		s.ID, s.Type = ledger.IdentitySpec{Header: "Linear-Delivery"}, ledger.TypeSpec{Header: "Linear-Event", Pointer: "/action"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/createdAt", Format: ledger.TimeRFC3339}
		s.Keep = []string{"Linear-Delivery", "Linear-Event"}
		return s
	},
	PresetGitLab: func() ledger.VerifySpec {
		return ledger.VerifySpec{Kind: ledger.VerifyKindToken,
			Signature: ledger.SignatureSpec{Header: "X-Gitlab-Token"},
			ID:        ledger.IdentitySpec{Header: "X-Gitlab-Event-UUID"},
			Type:      ledger.TypeSpec{Header: "X-Gitlab-Event"},
			Keep:      []string{"X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID", "X-Gitlab-Event", "X-Gitlab-Instance", "Idempotency-Key"}}
	},
	PresetDiscord: func() ledger.VerifySpec {
		s := hmacHex("X-Signature-Ed25519", "", timestamp, body)
		s.Kind = ledger.VerifyKindEd25519
		s.Timestamp = ledger.TimestampSpec{Header: "X-Signature-Timestamp"}
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/id"}, ledger.TypeSpec{Pointer: "/type"}
		s.Handshake = ledger.HandshakeDiscord
		return s
	},
	PresetZoom: func() ledger.VerifySpec {
		s := prefixed(hmacHex("X-Zm-Signature", "sha256", literal("v0:"), timestamp, literal(":"), body), "v0=")
		s.Timestamp = ledger.TimestampSpec{Header: "X-Zm-Request-Timestamp"}
		s.ID = ledger.IdentitySpec{Composite: []string{"/event", "/event_ts", "/payload/object/uuid", "/payload/object/id"}}
		s.Type = ledger.TypeSpec{Pointer: "/event"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/event_ts", Format: ledger.TimeUnixMS}
		s.Handshake = ledger.HandshakeZoom
		return s
	},
	ledger.ProviderStripe: func() ledger.VerifySpec {
		s := hmacHex("Stripe-Signature", "sha256", timestamp, dot, body)
		s.Signature = ledger.SignatureSpec{Header: "Stripe-Signature", Format: ledger.SignatureList, Keys: []string{"v1"}}
		s.Timestamp = ledger.TimestampSpec{Signature: "t"}
		s.ID, s.Type = ledger.IdentitySpec{Pointer: "/id"}, ledger.TypeSpec{Pointer: "/type"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/created"} // unix seconds, or RFC 3339 on v2 events
		return s
	},
	ledger.ProviderGitHub: func() ledger.VerifySpec {
		s := prefixed(hmacHex("X-Hub-Signature-256", "sha256", body), "sha256=")
		// issues.opened and issues.closed ask for different work; the event name alone
		// would route them the same way.
		s.ID, s.Type = ledger.IdentitySpec{Header: "X-GitHub-Delivery"}, ledger.TypeSpec{Header: "X-GitHub-Event", Pointer: "/action"}
		s.Form, s.Keep = "payload", []string{"X-GitHub-Delivery", "X-GitHub-Event", "X-GitHub-Hook-ID",
			"X-GitHub-Hook-Installation-Target-ID", "X-GitHub-Hook-Installation-Target-Type"}
		return s
	},
	ledger.ProviderShopify: func() ledger.VerifySpec {
		s := hmacBase64("X-Shopify-Hmac-Sha256", "sha256", body)
		s.ID, s.Type = ledger.IdentitySpec{Header: "X-Shopify-Webhook-Id"}, ledger.TypeSpec{Header: "X-Shopify-Topic"}
		// Unsigned, so it feeds staleness but never the tolerance.
		s.Occurred = ledger.TimestampSpec{Header: "X-Shopify-Triggered-At", Format: ledger.TimeRFC3339}
		s.Keep = []string{"X-Shopify-Webhook-Id", "X-Shopify-Event-Id", "X-Shopify-Topic",
			"X-Shopify-Shop-Domain", "X-Shopify-Triggered-At", "X-Shopify-API-Version"}
		return s
	},
	PresetResend:                    standardWebhooksSpec,
	PresetClerk:                     standardWebhooksSpec,
	ledger.ProviderStandardWebhooks: standardWebhooksSpec,
}

// standardWebhooksSpec is the Standard Webhooks scheme, with Svix's header names as
// its fallback family.
func standardWebhooksSpec() ledger.VerifySpec {
	family := func(prefix string) *ledger.VerifySpec {
		s := hmacBase64(prefix+"signature", "sha256",
			ledger.SignedPart{Kind: ledger.PartHeader, Value: prefix + "id"}, dot, timestamp, dot, body)
		s.Signature = ledger.SignatureSpec{Header: prefix + "signature", Format: ledger.SignatureList,
			Separator: " ", Pair: ",", Keys: []string{"v1"}}
		s.Key = "base64"
		s.Timestamp = ledger.TimestampSpec{Header: prefix + "timestamp"}
		s.ID, s.Type = ledger.IdentitySpec{Header: prefix + "id"}, ledger.TypeSpec{Pointer: "/type"}
		s.Occurred = ledger.TimestampSpec{Pointer: "/timestamp", Format: ledger.TimeRFC3339}
		s.OccurredFromTimestamp = true
		s.Keep = []string{prefix + "id", prefix + "timestamp"}
		return &s
	}
	s := family("webhook-")
	s.Fallback = family("svix-")
	return *s
}

// Preset returns a fresh copy of the named preset's scheme, for a caller to change.
func Preset(name string) (*ledger.VerifySpec, bool) {
	build, ok := presets[name]
	if !ok {
		return nil, false
	}
	s := build()
	return &s, true
}

// built holds each preset built once, for Verify, which only reads them.
var built = func() map[string]*ledger.VerifySpec {
	m := make(map[string]*ledger.VerifySpec, len(presets))
	for name := range presets {
		m[name], _ = Preset(name)
	}
	return m
}()

// Presets lists the preset names, sorted.
func Presets() []string {
	names := make([]string, 0, len(presets))
	for name := range presets {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}
