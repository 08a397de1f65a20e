package inbox

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/internal/batch"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
	"github.com/oncehook/oncehook/internal/tracing"
)

// maxIdentityLen bounds the provider's id and type: they are keys, not documents.
const maxIdentityLen = 512

// Inbox stores verified deliveries, once per delivery identity. Deliveries that
// arrive together are written together (see ingest_batch.go): one statement and one
// commit for a batch, each sender answered only after that commit.
type Inbox struct {
	pool    *pgxpool.Pool
	logger  *slog.Logger
	metrics *metrics.Metrics // may be nil
	routers *batch.Wakeup    // woken once a batch stored new events
	writer  *batch.Writer[eventRow, ledger.Receipt]
	store   store.Store // how a batch is inserted: one Postgres or Citus
}

// New returns an Inbox writing to pool. It runs until Close. metrics may be
// nil; otherwise every group commit is observed in oncehook_ingest_batch_size.
func New(pool *pgxpool.Pool, logger *slog.Logger, metrics *metrics.Metrics) *Inbox {
	return newInbox(pool, logger, metrics, nil)
}

func newInbox(pool *pgxpool.Pool, logger *slog.Logger, metrics *metrics.Metrics, tune func(*batch.Params[eventRow, ledger.Receipt])) *Inbox {
	if logger == nil {
		logger = slog.Default()
	}
	in := &Inbox{pool: pool, logger: logger, metrics: metrics, routers: ledger.NewWakeup(pool, ledger.ChannelEvents, logger),
		store: store.For(pool)}
	in.writer = newInboxWriter(in, tune)
	return in
}

// Close stops taking deliveries and returns once every delivery already handed to
// Accept is committed or refused; Accept answers EUNAVAILABLE afterwards. Call it
// after the HTTP server has finished its requests and before the pool closes.
func (in *Inbox) Close() { in.writer.Close() }

// CheckDelivery refuses identities the database could not store faithfully (invalid
// UTF-8, NUL bytes) or that are absurdly long, with EINVALID: the sender gets a 400
// it can read instead of a 503 it would retry forever.
func CheckDelivery(d ledger.Delivery) error {
	if d.ID == "" {
		return ledger.Errorf(ledger.EINVALID, "the request carries no delivery id")
	}
	for name, v := range map[string]string{"delivery id": d.ID, "event type": d.Type} {
		if len(v) > maxIdentityLen {
			return ledger.Errorf(ledger.EINVALID, "the %s is longer than %d bytes", name, maxIdentityLen)
		}
		if !ledger.IsStorableText(v) {
			return ledger.Errorf(ledger.EINVALID, "the %s is not valid UTF-8 text", name)
		}
	}
	for k, v := range d.Headers {
		if !ledger.IsStorableText(k) || !ledger.IsStorableText(v) {
			return ledger.Errorf(ledger.EINVALID, "header %q is not valid UTF-8 text", k)
		}
	}
	return nil
}

// Accept stores one verified delivery and returns once it is committed. A repeat of
// a known identity only counts the delivery; a repeat with a different body is kept
// beside the original and flags the event as a conflict. Storage trouble, or ctx
// ending first, comes back as EUNAVAILABLE so the sender retries; a delivery the
// database refuses on its own (and only it: the rest of its batch is stored) comes
// back as EINVALID.
func (in *Inbox) Accept(ctx context.Context, src settings.Source, d ledger.Delivery, raw []byte) (ledger.Receipt, error) {
	if err := CheckDelivery(d); err != nil {
		return ledger.Receipt{}, err
	}
	d.Headers = tracing.WithTraceparent(ctx, d.Headers)
	row, err := newEventRow(src, d, raw)
	if err != nil {
		return ledger.Receipt{}, err
	}
	return in.accept(ctx, row)
}

// Backfill stores one event that a backfill pass listed from the provider's API,
// through the same statement as a webhook, marked via backfill. Its authenticity comes
// from the API call, not a signature. An identity the inbox already holds is left
// untouched (Duplicate comes back true); errors are those of Accept.
func (in *Inbox) Backfill(ctx context.Context, src settings.Source, d ledger.Delivery) (ledger.Receipt, error) {
	if err := CheckDelivery(d); err != nil {
		return ledger.Receipt{}, err
	}
	row, err := newEventRow(src, d, d.Payload)
	if err != nil {
		return ledger.Receipt{}, err
	}
	row.via = ledger.ViaBackfill
	return in.accept(ctx, row)
}

// eventRow is one delivery as the inbox stores it.
type eventRow struct {
	client, environment, source, sourceEventID, typ string
	via                                             string // ledger.ViaWebhook or ledger.ViaBackfill
	body, payload, sum                              []byte
	headers                                         []byte
	occurredAt                                      string // RFC 3339 or "" when the provider gives no time
}

func newEventRow(src settings.Source, d ledger.Delivery, raw []byte) (eventRow, error) {
	sum := sha256.Sum256(raw)
	headers, err := json.Marshal(d.Headers)
	if err != nil {
		return eventRow{}, fmt.Errorf("encode identity headers: %w", err)
	}
	var payload []byte
	if string(d.Payload) != string(raw) {
		payload = d.Payload
	}
	var occurred string
	if !d.OccurredAt.IsZero() {
		occurred = d.OccurredAt.UTC().Format(time.RFC3339Nano)
	}
	return eventRow{
		client: src.Client, environment: src.Environment, source: src.Name, sourceEventID: d.ID,
		typ: d.Type, body: raw, payload: payload, sum: sum[:], headers: headers, occurredAt: occurred,
		via: ledger.ViaWebhook,
	}, nil
}
