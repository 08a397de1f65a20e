package alerts

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
)

// The signed webhook's event types.
const (
	EventDestinationDown      = "destination.down"
	EventDestinationRecovered = "destination.recovered"
)

// WebhookEvent is the body of a signed alert webhook.
type WebhookEvent struct {
	Type      string      `json:"type"`
	Timestamp time.Time   `json:"timestamp"`
	Data      WebhookData `json:"data"`
}

// WebhookData is what a signed alert webhook tells of the outage.
type WebhookData struct {
	Destination  string     `json:"destination"`
	OutageID     int64      `json:"outage_id"`
	DedupKey     string     `json:"dedup_key"`
	Since        time.Time  `json:"since"`
	Until        *time.Time `json:"until"`
	LastError    string     `json:"last_error"`
	OpenedBy     string     `json:"opened_by"`
	Waiting      []Waiting  `json:"waiting"`
	WaitingTotal int64      `json:"waiting_total"`
	URL          string     `json:"url"`
}

// webhookEvent is the event a posts.
func webhookEvent(a Alert, now time.Time) WebhookEvent {
	ev := WebhookEvent{Type: EventDestinationDown, Timestamp: now.UTC(), Data: WebhookData{
		Destination: a.Destination, OutageID: a.OutageID, DedupKey: a.DedupKey(), Since: a.OpenedAt.UTC(),
		LastError: a.Reason, OpenedBy: a.OpenedBy, Waiting: a.Waiting, WaitingTotal: a.WaitingTotal(), URL: a.URL}}
	if ev.Data.Waiting == nil {
		ev.Data.Waiting = []Waiting{}
	}
	if !a.Down() {
		ev.Type = EventDestinationRecovered
		until := a.ClosedAt.UTC()
		ev.Data.Until = &until
	}
	return ev
}

// postWebhook posts a to the channel's URL, signed as Standard Webhooks say
// (webhook-id, webhook-timestamp, webhook-signature), as oncehook verifies its
// senders. The id is the alert's, the same on every retry, for the receiver to
// drop a repeat.
func (s *Sender) postWebhook(ctx context.Context, ch settings.AlertChannel, a Alert) (int, error) {
	now := time.Now()
	body, err := json.Marshal(webhookEvent(a, now))
	if err != nil {
		return 0, fmt.Errorf("encode the webhook: %w", err)
	}
	hdr, err := sender.Headers(ledger.ProviderStandardWebhooks, ch.Secret,
		sender.Delivery{ID: fmt.Sprintf("alert_%d", a.ID), Body: body, At: now})
	if err != nil {
		return 0, fmt.Errorf("sign the webhook: %w", err)
	}
	status, err := s.post(ctx, ch.URL, hdr, body)
	if err != nil {
		return status, fmt.Errorf("the webhook %w", err)
	}
	return status, nil
}
