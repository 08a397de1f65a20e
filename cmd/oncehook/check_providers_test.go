package main

import (
	"os/exec"
	"regexp"
	"strings"
	"testing"
)

// providerSecrets holds a secret of the right shape for every source of
// examples/providers.example.yaml.
var providerSecrets = map[string]string{
	"STRIPE_WEBHOOK_SECRET":        "whsec_stripe",
	"GITHUB_WEBHOOK_SECRET":        "gh-secret",
	"SHOPIFY_WEBHOOK_SECRET":       "shopify-secret",
	"STANDARD_WEBHOOK_SECRET":      "whsec_c3RhbmRhcmQ=",
	"SLACK_SIGNING_SECRET":         "slack-secret",
	"TWILIO_AUTH_TOKEN":            "twilio-token",
	"PADDLE_WEBHOOK_SECRET":        "pdl_ntfset_secret",
	"SQUARE_SIGNATURE_KEY":         "square-key",
	"TYPEFORM_SECRET":              "typeform-secret",
	"CALENDLY_SIGNING_KEY":         "calendly-key",
	"INTERCOM_CLIENT_SECRET":       "intercom-secret",
	"ZENDESK_SIGNING_SECRET":       "zendesk-secret",
	"HUBSPOT_CLIENT_SECRET":        "hubspot-secret",
	"MAILGUN_SIGNING_KEY":          "mailgun-key",
	"SENDGRID_VERIFICATION_KEY":    "MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEEDr2LjtURuePQzplybdC+u4CwrqDqBaWjcMMsTbhdbcwHBcepxo7yAQGhHPTnlvFYPAZFceEu/1FwCM/QmGUhA==",
	"POSTMARK_WEBHOOK_CREDENTIALS": "hook:pa55",
	"LINEAR_SIGNING_SECRET":        "linear-secret",
	"GITLAB_WEBHOOK_TOKEN":         "gitlab-token",
	"DISCORD_PUBLIC_KEY":           "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
	"ZOOM_SECRET_TOKEN":            "zoom-token",
	"RESEND_WEBHOOK_SECRET":        "whsec_cmVzZW5k",
	"CLERK_WEBHOOK_SECRET":         "whsec_Y2xlcms=",
	"FORMS_WEBHOOK_SECRET":         "forms-secret",
}

// TestCheckEveryProvider runs `oncehook check` on a config with one source per
// provider: it passes and prints each ingest URL with the scheme that verifies it.
func TestCheckEveryProvider(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "check", "--config", "../../examples/providers.example.yaml")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	for k, v := range providerSecrets {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("check: %v\n%s", err, out)
	}
	want := map[string]string{
		"stripe":   `HMAC-SHA256 hex in Stripe-Signature over timestamp + "." + body, timestamped; id /id`,
		"github":   `HMAC-SHA256 hex in X-Hub-Signature-256 over body; id X-GitHub-Delivery`,
		"shopify":  `HMAC-SHA256 base64 in X-Shopify-Hmac-Sha256 over body; id X-Shopify-Webhook-Id`,
		"standard": `HMAC-SHA256 base64 in webhook-signature over webhook-id + "." + timestamp + "." + body, timestamped; id webhook-id`,
		"slack":    `HMAC-SHA256 hex in X-Slack-Signature over "v0:" + timestamp + ":" + body, timestamped; id /event_id+/trigger_id`,
		"twilio":   `HMAC-SHA1 base64 in X-Twilio-Signature over url + form; id I-Twilio-Idempotency-Token`,
		"paddle":   `HMAC-SHA256 hex in Paddle-Signature over timestamp + ":" + body, timestamped; id /event_id`,
		"square":   `HMAC-SHA256 base64 in X-Square-Hmacsha256-Signature over url + body; id /event_id`,
		"typeform": `HMAC-SHA256 base64 in Typeform-Signature over body; id /event_id`,
		"calendly": `HMAC-SHA256 hex in Calendly-Webhook-Signature over timestamp + "." + body, timestamped; id /event+/payload/uri+/created_at`,
		"intercom": `HMAC-SHA1 hex in X-Hub-Signature over body; id /id`,
		"zendesk":  `HMAC-SHA256 base64 in X-Zendesk-Webhook-Signature over timestamp + body, timestamped; id /id`,
		"hubspot":  `HMAC-SHA256 base64 in X-HubSpot-Signature-v3 over method + url + body + timestamp, timestamped; id /0/eventId`,
		"mailgun":  `HMAC-SHA256 hex in body /signature/signature over timestamp + /signature/token, timestamped; id /event-data/id`,
		"sendgrid": `ECDSA P-256 in X-Twilio-Email-Event-Webhook-Signature over timestamp + body, timestamped; id /0/sg_event_id`,
		"postmark": `HTTP basic credentials; id /RecordType+/MessageID+/ID+/DeliveredAt+/BouncedAt+/ReceivedAt+/ChangedAt`,
		"linear":   `HMAC-SHA256 hex in Linear-Signature over body, timestamped; id Linear-Delivery`,
		"gitlab":   `shared token in X-Gitlab-Token; id X-Gitlab-Event-UUID`,
		"discord":  `Ed25519 in X-Signature-Ed25519 over timestamp + body, timestamped; id /id`,
		"zoom":     `HMAC-SHA256 hex in X-Zm-Signature over "v0:" + timestamp + ":" + body, timestamped; id /event+/event_ts+/payload/object/uuid+/payload/object/id`,
		"resend":   `HMAC-SHA256 base64 in webhook-signature over webhook-id + "." + timestamp + "." + body, timestamped; id webhook-id`,
		"clerk":    `HMAC-SHA256 base64 in webhook-signature over webhook-id + "." + timestamp + "." + body, timestamped; id webhook-id`,
		"forms":    `HMAC-SHA256 hex in X-Forms-Signature over timestamp + "." + body, timestamped; id /delivery_id`,
	}
	text := string(out)
	for name, scheme := range want {
		line := regexp.MustCompile(`(?m)^  ` + regexp.QuoteMeta(name) + ` +https://hooks\.example\.com/hooks/` +
			regexp.QuoteMeta(name) + `  \((\S+), client acme, live; secrets from \S+\)\n +verified by (.*)$`)
		m := line.FindStringSubmatch(text)
		if m == nil {
			t.Errorf("no ingest URL line for %s in:\n%s", name, text)
			continue
		}
		if m[2] != scheme {
			t.Errorf("%s (%s) verified by %q, want %q", name, m[1], m[2], scheme)
		}
	}
	if n := strings.Count(text, "verified by "); n != len(want) {
		t.Errorf("%d sources described, want %d", n, len(want))
	}
}

// TestCheckEveryProviderSkipEnv: in CI without the secrets, --skip-env stands in for
// each one, whatever kind of key its scheme needs; a key of the wrong kind is
// refused with its line.
func TestCheckEveryProviderSkipEnv(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "check", "--config", "../../examples/providers.example.yaml", "--skip-env")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Not set here (serve will need them): STRIPE_WEBHOOK_SECRET,") ||
		strings.Count(string(out), "verified by ") != len(providerSecrets) {
		t.Fatalf("check --skip-env: %v\n%s", err, out)
	}
	cmd = exec.Command(binary, "check", "--config", "../../examples/providers.example.yaml", "--skip-env")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "DISCORD_PUBLIC_KEY=a-bot-token-by-mistake"}
	out, err = cmd.CombinedOutput()
	want := "providers.example.yaml:28:73: sources[18].secret_env: secret 1 in DISCORD_PUBLIC_KEY is not an Ed25519 public key written as 64 hex digits"
	if err == nil || !strings.Contains(string(out), want) || strings.Contains(string(out), "a-bot-token-by-mistake") {
		t.Fatalf("check with a wrong Discord key: %v\n%s\nwant %q", err, out, want)
	}
}
