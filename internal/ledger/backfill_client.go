package ledger

import (
	"context"
	"time"
)

// A BackfillClient asks one source's provider what it sent (docs/providers.md, "Backfill").
// provider/ has one for Stripe, whose events list carries each event, and one for
// GitHub, whose hook deliveries are sent again on request.
type BackfillClient interface {
	// List returns one page of what the provider sent at or after since, newest
	// first, and the cursor of the next page, "" after the last. Errors are
	// *ProviderError.
	List(ctx context.Context, since time.Time, cursor string) (BackfillPage, error)
	// Redeliver asks the provider to send the attempt again through the webhook
	// (GitHub); it is only asked for items without a Body.
	Redeliver(ctx context.Context, attemptID string) error
}

// BackfillPage is one page of a provider's list.
type BackfillPage struct {
	Items []BackfillItem
	Next  string
}

// BackfillItem is one event (Stripe) or delivery attempt (GitHub) the provider lists.
type BackfillItem struct {
	ID         string // the delivery identity: Stripe's event id, GitHub's delivery guid
	Type       string
	OccurredAt time.Time
	Body       []byte // Stripe: the event as the API returns it, stored as is; nil for GitHub
	Failed     bool   // GitHub: this attempt was not answered with a 2xx
	Status     int    // GitHub: the attempt's reply status; 0 when none came (refused, timed out)
	AttemptID  string // GitHub: the attempt to redeliver
	Redelivery bool   // GitHub: this attempt was itself a redelivery someone asked for
}

// ProviderError is a provider API's refusal, or its silence, during a pass.
type ProviderError struct {
	Status     int           // 0: no reply (timeout, connection refused)
	RetryAfter time.Duration // from a 429 (or GitHub's rate limit reset); 0 when not given
	Message    string        // plain words, never the key
}

func (e *ProviderError) Error() string { return e.Message }

// BackfillResult is what one pass found.
type BackfillResult struct {
	Source      string
	Listed      int      // what the provider listed in the window
	Missing     int      // of those, not in the inbox
	Stored      int      // stored as backfilled events
	Redelivered int      // redeliveries asked for
	Refused     []string // GitHub: deliveries oncehook itself refused (4xx), not asked for again
	Err         error
}
