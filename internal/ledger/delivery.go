package ledger

import (
	"time"
)

// Providers oncehook can verify.
const (
	ProviderStripe           = "stripe"
	ProviderGitHub           = "github"
	ProviderShopify          = "shopify"
	ProviderStandardWebhooks = "standard-webhooks"
)

// Delivery is what a verified webhook request says about itself.
type Delivery struct {
	// ID is the provider's delivery identity (Stripe body id, X-GitHub-Delivery,
	// X-Shopify-Webhook-Id, webhook-id).
	ID string
	// Type is the event type (Stripe/Standard body type, X-GitHub-Event[.action],
	// X-Shopify-Topic).
	Type string
	// OccurredAt is the provider's own time for the event where the request carries
	// one; zero otherwise.
	OccurredAt time.Time
	// Headers holds the identity headers only (never signatures or authorization),
	// keyed by canonical header name.
	Headers map[string]string
	// Payload is the JSON document the action rules read: the body, or for GitHub's
	// form encoding the decoded payload= value.
	Payload []byte
	// Answer, when set, is an endpoint handshake (Slack's url_verification, Zoom's
	// endpoint.url_validation, Discord's PING): the reply the provider expects,
	// sent instead of storing anything.
	Answer *Answer
}

// Answer is the reply to an endpoint handshake.
type Answer struct {
	ContentType string
	Body        []byte
}

// Receipt is what the sender is told once its delivery is durable.
type Receipt struct {
	EventID   int64
	Duplicate bool // a repeat of a delivery identity already stored
	Conflict  bool // a repeat whose body differs from the stored one
}
