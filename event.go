package oncehook

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// Event statuses (exact strings, used in the API and the pages).
const (
	EventReceived = "received"
	EventRouted   = "routed"
	EventIgnored  = "ignored"
	EventStale    = "stale"
	EventConflict = "conflict"
)

// maxIdentityLen bounds the provider's id and type: they are keys, not documents.
const maxIdentityLen = 512

// Receipt is what the sender is told once its delivery is durable.
type Receipt struct {
	EventID   int64
	Duplicate bool // a repeat of a delivery identity already stored
	Conflict  bool // a repeat whose body differs from the stored one
}

// Inbox stores verified deliveries, once per delivery identity.
type Inbox struct {
	pool   *pgxpool.Pool
	logger *slog.Logger
}

// NewInbox returns an Inbox writing to pool.
func NewInbox(pool *pgxpool.Pool, logger *slog.Logger) *Inbox {
	return &Inbox{pool: pool, logger: logger}
}

// CheckDelivery refuses identities the database could not store faithfully (invalid
// UTF-8, NUL bytes) or that are absurdly long, with EINVALID: the sender gets a 400
// it can read instead of a 503 it would retry forever.
func CheckDelivery(d Delivery) error {
	if d.ID == "" {
		return Errorf(EINVALID, "the request carries no delivery id")
	}
	for name, v := range map[string]string{"delivery id": d.ID, "event type": d.Type} {
		if len(v) > maxIdentityLen {
			return Errorf(EINVALID, "the %s is longer than %d bytes", name, maxIdentityLen)
		}
		if !printableText(v) {
			return Errorf(EINVALID, "the %s is not valid UTF-8 text", name)
		}
	}
	for k, v := range d.Headers {
		if !printableText(k) || !printableText(v) {
			return Errorf(EINVALID, "header %q is not valid UTF-8 text", k)
		}
	}
	return nil
}

func printableText(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return false
		}
	}
	return true
}

// Accept stores one verified delivery and returns once it is committed. A repeat of
// a known identity only counts the delivery; a repeat with a different body is kept
// beside the original and flags the event as a conflict. Storage trouble comes back
// as EUNAVAILABLE so the sender retries.
func (in *Inbox) Accept(ctx context.Context, src Source, d Delivery, raw []byte) (Receipt, error) {
	if err := CheckDelivery(d); err != nil {
		return Receipt{}, err
	}
	sum := sha256.Sum256(raw)
	headers, err := json.Marshal(d.Headers)
	if err != nil {
		return Receipt{}, fmt.Errorf("encode identity headers: %w", err)
	}
	var payload []byte
	if string(d.Payload) != string(raw) {
		payload = d.Payload
	}
	var occurred *time.Time
	if !d.OccurredAt.IsZero() {
		t := d.OccurredAt.UTC()
		occurred = &t
	}
	var rc Receipt
	err = db.WithTx(ctx, in.pool, func(q *db.Queries) error {
		row, err := q.EventInsert(ctx, db.EventInsertParams{
			Client: src.Client, Environment: src.Environment, Source: src.Name,
			SourceEventID: d.ID, Type: d.Type, Body: raw, Payload: payload,
			BodySha256: sum[:], Headers: headers, OccurredAt: occurred,
		})
		if err != nil {
			return fmt.Errorf("insert event: %w", err)
		}
		rc = Receipt{EventID: row.ID, Duplicate: !row.Inserted, Conflict: !row.SameBody}
		if rc.Conflict {
			err := q.EventConflictInsert(ctx, db.EventConflictInsertParams{
				Client: src.Client, EventID: row.ID, Body: raw, BodySha256: sum[:], Headers: headers,
			})
			if err != nil {
				return fmt.Errorf("keep conflicting body: %w", err)
			}
		}
		if row.Inserted {
			if err := q.Notify(ctx, channelEvents); err != nil {
				return fmt.Errorf("notify router: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return Receipt{}, &Error{Code: EUNAVAILABLE, Message: "Storage is unavailable; retry later.", Err: err}
	}
	return rc, nil
}
