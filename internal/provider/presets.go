package provider

import (
	"slices"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
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
	body      = settings.SignedPart{Kind: settings.PartBody}
	timestamp = settings.SignedPart{Kind: settings.PartTimestamp}
	dot       = literal(".")
)

func literal(s string) settings.SignedPart {
	return settings.SignedPart{Kind: settings.PartLiteral, Value: s}
}

func pointer(p string) settings.SignedPart {
	return settings.SignedPart{Kind: settings.PartPointer, Value: p}
}

func hmacHex(header string, alg string, signed ...settings.SignedPart) settings.VerifySpec {
	return settings.VerifySpec{Kind: settings.VerifyKindHMAC, Algorithm: alg, Encoding: "hex",
		Signature: settings.SignatureSpec{Header: header, Format: settings.SignaturePlain}, Signed: signed}
}

func hmacBase64(header string, alg string, signed ...settings.SignedPart) settings.VerifySpec {
	s := hmacHex(header, alg, signed...)
	s.Encoding = "base64"
	return s
}

func prefixed(s settings.VerifySpec, prefix string) settings.VerifySpec {
	s.Signature.Format, s.Signature.Prefix = settings.SignaturePrefix, prefix
	return s
}

// presets builds every preset afresh, so a caller may change its copy.
var presets = map[string]func() settings.VerifySpec{
	PresetSlack: func() settings.VerifySpec {
		s := prefixed(hmacHex("X-Slack-Signature", "sha256", literal("v0:"), timestamp, literal(":"), body), "v0=")
		s.Timestamp = settings.TimestampSpec{Header: "X-Slack-Request-Timestamp"}
		// Events API deliveries carry event_id; slash commands and interactivity carry
		// only a trigger_id.
		s.ID = settings.IdentitySpec{Composite: []string{"/event_id", "/trigger_id"}}
		s.Type = settings.TypeSpec{Pointer: "/event/type"}
		s.Form, s.FormFields, s.Handshake, s.Keep = "payload", true, settings.HandshakeSlack, []string{"X-Slack-Retry-Num", "X-Slack-Retry-Reason"}
		return s
	},
	PresetTwilio: func() settings.VerifySpec {
		s := hmacBase64("X-Twilio-Signature", "sha1", settings.SignedPart{Kind: settings.PartURL}, settings.SignedPart{Kind: settings.PartForm})
		s.ID = settings.IdentitySpec{Header: "I-Twilio-Idempotency-Token"}
		s.Form, s.Keep = "*", []string{"I-Twilio-Idempotency-Token"}
		return s
	},
	PresetPaddle: func() settings.VerifySpec {
		s := hmacHex("Paddle-Signature", "sha256", timestamp, literal(":"), body)
		s.Signature = settings.SignatureSpec{Header: "Paddle-Signature", Format: settings.SignatureList, Separator: ";", Keys: []string{"h1"}}
		s.Timestamp = settings.TimestampSpec{Signature: "ts"}
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/event_id"}, settings.TypeSpec{Pointer: "/event_type"}
		s.Occurred = settings.TimestampSpec{Pointer: "/occurred_at", Format: settings.TimeRFC3339}
		return s
	},
	PresetSquare: func() settings.VerifySpec {
		s := hmacBase64("X-Square-Hmacsha256-Signature", "sha256", settings.SignedPart{Kind: settings.PartURL}, body)
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/event_id"}, settings.TypeSpec{Pointer: "/type"}
		s.Occurred = settings.TimestampSpec{Pointer: "/created_at", Format: settings.TimeRFC3339}
		return s
	},
	PresetTypeform: func() settings.VerifySpec {
		s := prefixed(hmacBase64("Typeform-Signature", "sha256", body), "sha256=")
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/event_id"}, settings.TypeSpec{Pointer: "/event_type"}
		s.Occurred = settings.TimestampSpec{Pointer: "/form_response/submitted_at", Format: settings.TimeRFC3339}
		return s
	},
	PresetCalendly: func() settings.VerifySpec {
		s := hmacHex("Calendly-Webhook-Signature", "sha256", timestamp, dot, body)
		s.Signature = settings.SignatureSpec{Header: "Calendly-Webhook-Signature", Format: settings.SignatureList, Keys: []string{"v1"}}
		s.Timestamp = settings.TimestampSpec{Signature: "t"}
		s.ID = settings.IdentitySpec{Composite: []string{"/event", "/payload/uri", "/created_at"}}
		s.Type = settings.TypeSpec{Pointer: "/event"}
		s.Occurred = settings.TimestampSpec{Pointer: "/created_at", Format: settings.TimeRFC3339}
		return s
	},
	PresetIntercom: func() settings.VerifySpec {
		s := prefixed(hmacHex("X-Hub-Signature", "sha1", body), "sha1=")
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/id"}, settings.TypeSpec{Pointer: "/topic"}
		s.Occurred = settings.TimestampSpec{Pointer: "/created_at"}
		return s
	},
	PresetZendesk: func() settings.VerifySpec {
		s := hmacBase64("X-Zendesk-Webhook-Signature", "sha256", timestamp, body)
		s.Timestamp = settings.TimestampSpec{Header: "X-Zendesk-Webhook-Signature-Timestamp", Format: settings.TimeRFC3339}
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/id"}, settings.TypeSpec{Pointer: "/type"}
		s.Occurred = settings.TimestampSpec{Pointer: "/time", Format: settings.TimeRFC3339}
		s.Keep = []string{"X-Zendesk-Webhook-Id", "X-Zendesk-Webhook-Invocation-Id"}
		return s
	},
	PresetHubSpot: func() settings.VerifySpec {
		s := hmacBase64("X-HubSpot-Signature-v3", "sha256",
			settings.SignedPart{Kind: settings.PartMethod}, settings.SignedPart{Kind: settings.PartURL}, body, timestamp)
		s.Timestamp = settings.TimestampSpec{Header: "X-HubSpot-Request-Timestamp", Format: settings.TimeUnixMS}
		// HubSpot posts a list of up to 100 events; the first one's id (a number, so a
		// composite of one) names the batch.
		s.Array = true
		s.ID, s.Type = settings.IdentitySpec{Composite: []string{"/0/eventId"}}, settings.TypeSpec{Pointer: "/0/subscriptionType"}
		s.Occurred = settings.TimestampSpec{Pointer: "/0/occurredAt", Format: settings.TimeUnixMS}
		return s
	},
	PresetMailgun: func() settings.VerifySpec {
		s := hmacHex("", "sha256", timestamp, pointer("/signature/token"))
		s.Signature = settings.SignatureSpec{Pointer: "/signature/signature", Format: settings.SignaturePlain}
		s.Timestamp = settings.TimestampSpec{Pointer: "/signature/timestamp"}
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/event-data/id"}, settings.TypeSpec{Pointer: "/event-data/event"}
		return s
	},
	PresetSendGrid: func() settings.VerifySpec {
		s := hmacBase64("X-Twilio-Email-Event-Webhook-Signature", "", timestamp, body)
		s.Kind = settings.VerifyKindECDSA
		s.Timestamp = settings.TimestampSpec{Header: "X-Twilio-Email-Event-Webhook-Timestamp"}
		// SendGrid posts a list of events; the first one's id names the batch.
		s.Array = true
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/0/sg_event_id"}, settings.TypeSpec{Pointer: "/0/event"}
		s.Occurred = settings.TimestampSpec{Pointer: "/0/timestamp"}
		return s
	},
	PresetPostmark: func() settings.VerifySpec {
		return settings.VerifySpec{Kind: settings.VerifyKindBasic,
			ID: settings.IdentitySpec{Composite: []string{"/RecordType", "/MessageID", "/ID",
				"/DeliveredAt", "/BouncedAt", "/ReceivedAt", "/ChangedAt"}},
			Type: settings.TypeSpec{Pointer: "/RecordType"}}
	},
	PresetLinear: func() settings.VerifySpec {
		s := hmacHex("Linear-Signature", "sha256", body)
		s.Timestamp = settings.TimestampSpec{Pointer: "/webhookTimestamp", Format: settings.TimeUnixMS}
		s.ID, s.Type = settings.IdentitySpec{Header: "Linear-Delivery"}, settings.TypeSpec{Header: "Linear-Event", Pointer: "/action"}
		s.Occurred = settings.TimestampSpec{Pointer: "/createdAt", Format: settings.TimeRFC3339}
		s.Keep = []string{"Linear-Delivery", "Linear-Event"}
		return s
	},
	PresetGitLab: func() settings.VerifySpec {
		return settings.VerifySpec{Kind: settings.VerifyKindToken,
			Signature: settings.SignatureSpec{Header: "X-Gitlab-Token"},
			ID:        settings.IdentitySpec{Header: "X-Gitlab-Event-UUID"},
			Type:      settings.TypeSpec{Header: "X-Gitlab-Event"},
			Keep:      []string{"X-Gitlab-Event-UUID", "X-Gitlab-Webhook-UUID", "X-Gitlab-Event", "X-Gitlab-Instance", "Idempotency-Key"}}
	},
	PresetDiscord: func() settings.VerifySpec {
		s := hmacHex("X-Signature-Ed25519", "", timestamp, body)
		s.Kind = settings.VerifyKindEd25519
		s.Timestamp = settings.TimestampSpec{Header: "X-Signature-Timestamp"}
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/id"}, settings.TypeSpec{Pointer: "/type"}
		s.Handshake = settings.HandshakeDiscord
		return s
	},
	PresetZoom: func() settings.VerifySpec {
		s := prefixed(hmacHex("X-Zm-Signature", "sha256", literal("v0:"), timestamp, literal(":"), body), "v0=")
		s.Timestamp = settings.TimestampSpec{Header: "X-Zm-Request-Timestamp"}
		s.ID = settings.IdentitySpec{Composite: []string{"/event", "/event_ts", "/payload/object/uuid", "/payload/object/id"}}
		s.Type = settings.TypeSpec{Pointer: "/event"}
		s.Occurred = settings.TimestampSpec{Pointer: "/event_ts", Format: settings.TimeUnixMS}
		s.Handshake = settings.HandshakeZoom
		return s
	},
	ledger.ProviderStripe: func() settings.VerifySpec {
		s := hmacHex("Stripe-Signature", "sha256", timestamp, dot, body)
		s.Signature = settings.SignatureSpec{Header: "Stripe-Signature", Format: settings.SignatureList, Keys: []string{"v1"}}
		s.Timestamp = settings.TimestampSpec{Signature: "t"}
		s.ID, s.Type = settings.IdentitySpec{Pointer: "/id"}, settings.TypeSpec{Pointer: "/type"}
		s.Occurred = settings.TimestampSpec{Pointer: "/created"} // unix seconds, or RFC 3339 on v2 events
		return s
	},
	ledger.ProviderGitHub: func() settings.VerifySpec {
		s := prefixed(hmacHex("X-Hub-Signature-256", "sha256", body), "sha256=")
		// issues.opened and issues.closed ask for different work; the event name alone
		// would route them the same way.
		s.ID, s.Type = settings.IdentitySpec{Header: "X-GitHub-Delivery"}, settings.TypeSpec{Header: "X-GitHub-Event", Pointer: "/action"}
		s.Form, s.Keep = "payload", []string{"X-GitHub-Delivery", "X-GitHub-Event", "X-GitHub-Hook-ID",
			"X-GitHub-Hook-Installation-Target-ID", "X-GitHub-Hook-Installation-Target-Type"}
		return s
	},
	ledger.ProviderShopify: func() settings.VerifySpec {
		s := hmacBase64("X-Shopify-Hmac-Sha256", "sha256", body)
		s.ID, s.Type = settings.IdentitySpec{Header: "X-Shopify-Webhook-Id"}, settings.TypeSpec{Header: "X-Shopify-Topic"}
		// Unsigned, so it feeds staleness but never the tolerance.
		s.Occurred = settings.TimestampSpec{Header: "X-Shopify-Triggered-At", Format: settings.TimeRFC3339}
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
func standardWebhooksSpec() settings.VerifySpec {
	family := func(prefix string) *settings.VerifySpec {
		s := hmacBase64(prefix+"signature", "sha256",
			settings.SignedPart{Kind: settings.PartHeader, Value: prefix + "id"}, dot, timestamp, dot, body)
		s.Signature = settings.SignatureSpec{Header: prefix + "signature", Format: settings.SignatureList,
			Separator: " ", Pair: ",", Keys: []string{"v1"}}
		s.Key = "base64"
		s.Timestamp = settings.TimestampSpec{Header: prefix + "timestamp"}
		s.ID, s.Type = settings.IdentitySpec{Header: prefix + "id"}, settings.TypeSpec{Pointer: "/type"}
		s.Occurred = settings.TimestampSpec{Pointer: "/timestamp", Format: settings.TimeRFC3339}
		s.OccurredFromTimestamp = true
		s.Keep = []string{prefix + "id", prefix + "timestamp"}
		return &s
	}
	s := family("webhook-")
	s.Fallback = family("svix-")
	return *s
}

// Preset returns a fresh copy of the named preset's scheme, for a caller to change.
func Preset(name string) (*settings.VerifySpec, bool) {
	build, ok := presets[name]
	if !ok {
		return nil, false
	}
	s := build()
	return &s, true
}

// built holds each preset built once, for Verify, which only reads them.
var built = func() map[string]*settings.VerifySpec {
	m := make(map[string]*settings.VerifySpec, len(presets))
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
