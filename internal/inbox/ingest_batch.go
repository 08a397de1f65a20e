package inbox

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/batch"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/store"
)

// Group commit. A durable commit costs a WAL flush and a round of statements, so one
// per webhook caps ingest at what the database can commit one by one. Deliveries
// that arrive together are instead written by one multi-row INSERT that commits on
// its own (a batch.Writer gathers them), and every sender is answered only after
// that commit.
const (
	// inboxWriters is how many batches are written at once: a second batch is
	// sent when the first has been on its way for batch.GroupWait, so one slow
	// statement (a repeat waiting for the router's lock on its row) does not hold
	// up every sender.
	inboxWriters = 2
	// inboxTimeout bounds a batch whose requests carry no deadline of their own.
	inboxTimeout = 10 * time.Second
)

// newInboxWriter returns the group writer of in; tune, when set, adjusts its
// parameters (tests).
func newInboxWriter(in *Inbox, tune func(*batch.Params[eventRow, ledger.Receipt])) *batch.Writer[eventRow, ledger.Receipt] {
	p := batch.Params[eventRow, ledger.Receipt]{
		Write:   in.write,
		Split:   ledger.Splittable,
		After:   in.written,
		Writers: inboxWriters,
		Timeout: inboxTimeout,
	}
	if tune != nil {
		tune(&p)
	}
	return batch.New(p)
}

// accept hands row to the writer and waits for its batch's commit, or for ctx to
// end.
func (in *Inbox) accept(ctx context.Context, row eventRow) (ledger.Receipt, error) {
	rc, err := in.writer.Submit(ctx, row)
	var told *ledger.Error // what write and writeBatch answer with
	if err != nil && !errors.As(err, &told) {
		// The inbox is closed, or ctx ended first. In that case the batch may
		// still commit the delivery: a 503 for a stored delivery only makes the
		// sender repeat it, and the repeat is counted, never stored twice.
		return ledger.Receipt{}, unavailable(err)
	}
	return rc, err
}

// write stores one batch (see writeBatch) and observes its commit. A batch the
// database refuses for a reason other than storage trouble is written again by
// the writer delivery by delivery (see splittable), so a single bad row cannot
// refuse the others.
func (in *Inbox) write(ctx context.Context, rows []eventRow) ([]batch.Result[ledger.Receipt], error) {
	replies, err := writeBatch(ctx, in.pool, in.store, rows)
	if err != nil {
		switch {
		case !ledger.Splittable(err):
		case len(rows) > 1:
			in.logger.Warn("a batch of deliveries was refused; writing them one by one", "size", len(rows), "err", err)
		default:
			in.logger.Warn("delivery not stored", "source", rows[0].source, "id", rows[0].sourceEventID, "err", err)
		}
		return nil, storeError(err)
	}
	in.metrics.IngestBatch(len(rows))
	for i, r := range replies {
		if r.Err != nil {
			in.logger.Warn("delivery stored, but its conflicting body not kept; the sender is told to retry",
				"source", rows[i].source, "id", rows[i].sourceEventID, "err", r.Err)
		}
	}
	return replies, nil
}

// written wakes the routers once a batch stored a new event, after its senders
// were answered.
func (in *Inbox) written(replies []batch.Result[ledger.Receipt]) {
	if storedNew(replies) {
		in.routers.Send()
	}
}

// storedNew tells whether a batch stored a new event: the first delivery of a new
// identity is told it is no duplicate.
func storedNew(replies []batch.Result[ledger.Receipt]) bool {
	for _, r := range replies {
		if r.Err == nil && !r.Value.Duplicate {
			return true
		}
	}
	return false
}

// identity is what makes two deliveries the same: the unique key of events.
type identity struct{ client, source, id string }

func (r eventRow) identity() identity { return identity{r.client, r.source, r.sourceEventID} }

// writeBatch stores deliveries with the store's InsertEvents and returns what to
// tell each sender, in order. Repeats of one identity are folded into one row first; the
// row's stored body tells each repeat from a conflict, and conflicting bodies are
// kept. An error means the statement failed and nothing was stored. Once it has committed, the
// batch is never written again (that would count every delivery in it twice):
// trouble after that fails the deliveries concerned, each with its own reply, and
// a conflicting body that cannot be kept fails only its own delivery, so that its
// sender's retry keeps it then.
func writeBatch(ctx context.Context, pool *pgxpool.Pool, s store.Store, deliveries []eventRow) ([]batch.Result[ledger.Receipt], error) {
	folds, p := foldBatch(deliveries)
	q := db.New(pool)
	// The bytes go to today's partition; a server down for longer than the
	// partitions' lead finds it missing, makes it and writes the batch again
	// (the failed statement stored nothing).
	p.Day = partitions.Day(time.Now())
	var rows []db.EventInsertBatchRow
	err := partitions.Retry(ctx, q, p.Day, func() (err error) {
		rows, err = s.InsertEvents(ctx, pool, p)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("insert events: %w", err)
	}
	return batchReplies(ctx, q, deliveries, folds, rows), nil
}

// fold is one identity of a batch: the deliveries of the same event folded into
// the one row the statement writes or updates.
type fold struct {
	lead       int   // index in the batch of the identity's first delivery
	deliveries int32 // how many requests the row stands for
	differ     bool  // their bodies are not all the same
}

// foldBatch folds the batch's repeats into one row per identity (one statement
// cannot update a row twice) and lays the rows out as the statement's arrays,
// sorted by identity so that batches lock rows in one order.
func foldBatch(deliveries []eventRow) (map[identity]*fold, db.EventInsertBatchParams) {
	folds := map[identity]*fold{}
	var leads []int
	for i, d := range deliveries {
		id := d.identity()
		f, seen := folds[id]
		if !seen {
			f = &fold{lead: i}
			folds[id] = f
			leads = append(leads, i)
		}
		f.deliveries++
		lead := deliveries[f.lead]
		f.differ = f.differ || lead.via == d.via && !bytes.Equal(lead.sum, d.sum)
	}
	slices.SortFunc(leads, func(a, b int) int {
		x, y := deliveries[a].identity(), deliveries[b].identity()
		return cmp.Or(cmp.Compare(x.client, y.client), cmp.Compare(x.source, y.source), cmp.Compare(x.id, y.id))
	})
	p := db.EventInsertBatchParams{}
	for _, i := range leads {
		r := deliveries[i]
		f := folds[r.identity()]
		p.Clients = append(p.Clients, r.client)
		p.Environments = append(p.Environments, r.environment)
		p.Sources = append(p.Sources, r.source)
		p.SourceEventIds = append(p.SourceEventIds, r.sourceEventID)
		p.Types = append(p.Types, r.typ)
		p.Bodies = append(p.Bodies, r.body)
		p.Payloads = append(p.Payloads, r.payload)
		p.BodySha256s = append(p.BodySha256s, r.sum)
		p.Headers = append(p.Headers, r.headers)
		p.OccurredAts = append(p.OccurredAts, r.occurredAt)
		p.Deliveries = append(p.Deliveries, f.deliveries)
		p.Conflicts = append(p.Conflicts, f.differ)
		p.Vias = append(p.Vias, r.via)
	}
	return folds, p
}

// batchReplies answers each delivery of a committed batch from the rows the
// statement returned, keeping each conflicting body before its sender is answered.
func batchReplies(ctx context.Context, q *db.Queries, deliveries []eventRow, folds map[identity]*fold,
	rows []db.EventInsertBatchRow) []batch.Result[ledger.Receipt] {
	stored := make(map[identity]db.EventInsertBatchRow, len(rows))
	for _, row := range rows {
		stored[identity{row.Client, row.Source, row.SourceEventID}] = row
	}
	type body struct {
		event int64
		sum   string
	}
	keeping := map[body]error{} // conflicting bodies this batch tried to keep
	replies := make([]batch.Result[ledger.Receipt], len(deliveries))
	for i, d := range deliveries {
		id := d.identity()
		row, ok := stored[id]
		if !ok { // cannot happen: the statement returns every row it wrote or updated
			replies[i] = batch.Result[ledger.Receipt]{Err: unavailable(fmt.Errorf("insert events: no row came back for %s/%s", id.source, id.id))}
			continue
		}
		// Only bodies that came the same way are compared (see EventInsertBatch).
		rc := ledger.Receipt{EventID: row.ID, Duplicate: !row.Inserted || folds[id].lead != i,
			Conflict: row.Via == d.via && !bytes.Equal(row.BodySha256, d.sum)}
		replies[i] = batch.Result[ledger.Receipt]{Value: rc}
		if !rc.Conflict {
			continue
		}
		k := body{row.ID, string(d.sum)}
		err, tried := keeping[k]
		if !tried {
			err = q.EventConflictInsert(ctx, db.EventConflictInsertParams{
				Client: d.client, EventID: row.ID, Body: d.body, BodySha256: d.sum, Headers: d.headers,
			})
			keeping[k] = err
		}
		if err != nil {
			replies[i] = batch.Result[ledger.Receipt]{Err: storeError(fmt.Errorf("keep conflicting body of event %d: %w", row.ID, err))}
		}
	}
	return replies
}

// storeError is what a caller is told when its delivery could not be stored: the
// database refusing this very row is the row's problem (EINVALID); anything else is
// storage trouble the sender should wait out (EUNAVAILABLE).
func storeError(err error) error {
	if _, refused := db.Refused(err); refused {
		return &ledger.Error{Code: ledger.EINVALID, Message: "The delivery could not be stored as sent.", Err: err}
	}
	return unavailable(err)
}

func unavailable(err error) error {
	return &ledger.Error{Code: ledger.EUNAVAILABLE, Message: "Storage is unavailable; retry later.", Err: err}
}
