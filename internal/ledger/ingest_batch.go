package ledger

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// Group commit. A durable commit costs a WAL flush and a round of statements, so one
// per webhook caps ingest at what the database can commit one by one. Deliveries
// that arrive together are instead written by one multi-row INSERT that commits on
// its own, and every sender is answered only after that commit.
const (
	// defaultBatchSize bounds one statement; 32 concurrent senders fill it.
	defaultBatchSize = 64
	// defaultBatchWait is how long the first delivery of a batch waits for company
	// while another batch is being written; when none is, a batch is written at once.
	defaultBatchWait = 2 * time.Millisecond
	// defaultFlushers is how many batches are written at once: a second batch is
	// sent when the first has been on its way for defaultBatchWait, so one slow
	// statement (a repeat waiting for the router's lock on its row) does not hold
	// up every sender.
	defaultFlushers = 2
	// batchTimeout bounds a batch whose requests carry no deadline of their own.
	batchTimeout = 10 * time.Second
)

// errInboxClosed is what Accept meets after Close.
var errInboxClosed = errors.New("the inbox is closed")

// batchParams tunes the batcher; zero values take the defaults.
type batchParams struct {
	size     int
	wait     time.Duration
	flushers int
}

// pendingDelivery is one Accept call waiting for its batch to commit.
type pendingDelivery struct {
	ctx   context.Context
	row   eventRow
	reply chan batchReply // buffered: the batcher never waits for a caller that left
}

type batchReply struct {
	rc  Receipt
	err error
}

// batcher collects deliveries into batches and writes each batch with one statement.
type batcher struct {
	pool    *pgxpool.Pool
	logger  *slog.Logger
	metrics *Metrics // may be nil
	p       batchParams
	routers *wakeup // woken once a batch stored new events

	queue    chan *pendingDelivery
	slots    chan struct{} // one token per batch being written
	written  chan struct{} // a batch has been written (buffered: a wake-up, not a count)
	flushing sync.WaitGroup

	mu        sync.RWMutex // held shared while sending to queue, exclusively to close
	closed    bool
	closing   chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

func newBatcher(pool *pgxpool.Pool, logger *slog.Logger, metrics *Metrics, p batchParams) *batcher {
	if p.size <= 0 {
		p.size = defaultBatchSize
	}
	if p.wait <= 0 {
		p.wait = defaultBatchWait
	}
	if p.flushers <= 0 {
		p.flushers = defaultFlushers
	}
	b := &batcher{
		pool: pool, logger: logger, metrics: metrics, p: p,
		routers: newWakeup(pool, channelEvents, logger),
		queue:   make(chan *pendingDelivery, p.size*(p.flushers+1)),
		slots:   make(chan struct{}, p.flushers),
		written: make(chan struct{}, 1),
		closing: make(chan struct{}),
		done:    make(chan struct{}),
	}
	go b.run()
	return b
}

// accept queues row and waits for its batch's commit, or for ctx to end.
func (b *batcher) accept(ctx context.Context, row eventRow) (Receipt, error) {
	d := &pendingDelivery{ctx: ctx, row: row, reply: make(chan batchReply, 1)}
	if err := b.submit(ctx, d); err != nil {
		return Receipt{}, unavailable(err)
	}
	select {
	case r := <-d.reply:
		return r.rc, r.err
	case <-ctx.Done():
		// The batch may still commit it: a 503 for a stored delivery only makes the
		// sender repeat it, and the repeat is counted, never stored twice.
		return Receipt{}, unavailable(ctx.Err())
	}
}

func (b *batcher) submit(ctx context.Context, d *pendingDelivery) error {
	b.mu.RLock()
	defer b.mu.RUnlock()
	if b.closed {
		return errInboxClosed
	}
	select {
	case b.queue <- d:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// close stops taking deliveries, then waits until the queued ones are written.
func (b *batcher) close() {
	b.closeOnce.Do(func() {
		b.mu.Lock() // no submit is halfway through a send once this is held
		b.closed = true
		b.mu.Unlock()
		close(b.closing)
	})
	<-b.done
}

func (b *batcher) run() {
	defer close(b.done)
	defer b.flushing.Wait()
	for {
		batch, more := b.collect()
		if len(batch) > 0 {
			b.dispatch(batch)
		}
		if !more {
			return
		}
	}
}

// collect waits for a first delivery, then, while another batch is being written,
// for company until the batch is full, the batch being written has committed or
// the wait is over. With nothing being written it returns at once: the deliveries
// that arrive while a batch is written form the next one, so batches grow with the
// load and a lone delivery waits for nothing. After close it drains the queue
// without waiting; more is false once the queue is empty.
func (b *batcher) collect() (batch []*pendingDelivery, more bool) {
	select {
	case d := <-b.queue:
		batch = append(batch, d)
	case <-b.closing:
		for len(batch) < b.p.size {
			select {
			case d := <-b.queue:
				batch = append(batch, d)
			default:
				return batch, false
			}
		}
		return batch, true
	}
	var waited <-chan time.Time
	for len(batch) < b.p.size {
		select {
		case d := <-b.queue: // company that has already arrived joins first
			batch = append(batch, d)
			continue
		default:
		}
		if len(b.slots) == 0 { // nothing is being written
			return batch, true
		}
		if waited == nil {
			timer := time.NewTimer(b.p.wait)
			defer timer.Stop()
			waited = timer.C
		}
		select {
		case d := <-b.queue:
			batch = append(batch, d)
		case <-b.written:
		case <-waited:
			return batch, true
		case <-b.closing:
			return batch, true
		}
	}
	return batch, true
}

// dispatch writes batch as soon as a slot is free, taking in more deliveries while
// every slot is busy: the slower the database, the larger the batches.
func (b *batcher) dispatch(batch []*pendingDelivery) {
	for len(batch) < b.p.size {
		select {
		case b.slots <- struct{}{}:
			b.start(batch)
			return
		case d := <-b.queue:
			batch = append(batch, d)
		}
	}
	b.slots <- struct{}{}
	b.start(batch)
}

func (b *batcher) start(batch []*pendingDelivery) {
	b.flushing.Add(1)
	go func() {
		defer b.flushing.Done()
		stored := b.flush(batch)
		<-b.slots
		wake(b.written)
		if stored {
			b.routers.send()
		}
	}()
}

// flush writes one batch and answers every caller still waiting. If the batch as a
// whole is refused for a reason other than storage trouble, its deliveries are
// written one by one, so a single bad row cannot refuse the others. It tells
// whether it stored a new event.
func (b *batcher) flush(batch []*pendingDelivery) (stored bool) {
	live := batch[:0]
	for _, d := range batch {
		if d.ctx.Err() == nil { // the others were already told 503
			live = append(live, d)
		}
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := batchContext(live)
	defer cancel()
	replies, stored, err := writeBatch(ctx, b.pool, live)
	if err == nil {
		b.metrics.IngestBatch(len(live))
		for i, d := range live {
			if replies[i].err != nil {
				b.logger.Warn("delivery stored, but its conflicting body not kept; the sender is told to retry",
					"source", d.row.source, "id", d.row.sourceEventID, "err", replies[i].err)
			}
			d.reply <- replies[i]
		}
		return stored
	}
	if len(live) == 1 || db.IsUnavailable(err) {
		for _, d := range live {
			d.reply <- batchReply{err: storeError(err)}
		}
		return
	}
	b.logger.Warn("a batch of deliveries was refused; writing them one by one", "size", len(live), "err", err)
	for _, d := range live {
		if d.ctx.Err() != nil {
			continue
		}
		replies, one, err := writeBatch(d.ctx, b.pool, []*pendingDelivery{d})
		if err != nil {
			b.logger.Warn("delivery not stored", "source", d.row.source, "id", d.row.sourceEventID, "err", err)
			d.reply <- batchReply{err: storeError(err)}
			continue
		}
		stored = stored || one
		b.metrics.IngestBatch(1)
		d.reply <- replies[0]
	}
	return stored
}

// batchContext lasts as long as the most patient caller of the batch.
func batchContext(batch []*pendingDelivery) (context.Context, context.CancelFunc) {
	var latest time.Time
	for _, d := range batch {
		dl, ok := d.ctx.Deadline()
		if !ok {
			dl = time.Now().Add(batchTimeout)
		}
		if dl.After(latest) {
			latest = dl
		}
	}
	return context.WithDeadline(context.Background(), latest)
}

// identity is what makes two deliveries the same: the unique key of events.
type identity struct{ client, source, id string }

func (r eventRow) identity() identity { return identity{r.client, r.source, r.sourceEventID} }

// writeBatch stores batch with one statement and returns what to tell each sender,
// in order. Repeats of one identity are folded into one row first; the row's stored
// body tells each repeat from a conflict, and conflicting bodies are kept. An error
// means the statement failed and nothing was stored. Once it has committed, the
// batch is never written again (that would count every delivery in it twice):
// trouble after that fails the deliveries concerned, each with its own reply, and
// a conflicting body that cannot be kept fails only its own delivery, so that its
// sender's retry keeps it then.
func writeBatch(ctx context.Context, pool *pgxpool.Pool, batch []*pendingDelivery) (replies []batchReply, stored bool, err error) {
	folds, p := foldBatch(batch)
	// The statement commits on its own.
	q := db.New(pool)
	rows, err := q.EventInsertBatch(ctx, p)
	if err != nil {
		return nil, false, fmt.Errorf("insert events: %w", err)
	}
	for _, r := range rows {
		stored = stored || r.Inserted
	}
	return batchReplies(ctx, q, batch, folds, rows), stored, nil
}

// fold is one identity of a batch: the deliveries of the same event folded into
// the one row the statement writes or updates.
type fold struct {
	lead       int   // index in batch of the identity's first delivery
	deliveries int32 // how many requests the row stands for
	differ     bool  // their bodies are not all the same
}

// foldBatch folds the batch's repeats into one row per identity (one statement
// cannot update a row twice) and lays the rows out as the statement's arrays,
// sorted by identity so that batches lock rows in one order.
func foldBatch(batch []*pendingDelivery) (map[identity]*fold, db.EventInsertBatchParams) {
	folds := map[identity]*fold{}
	var leads []int
	for i, d := range batch {
		id := d.row.identity()
		f, seen := folds[id]
		if !seen {
			f = &fold{lead: i}
			folds[id] = f
			leads = append(leads, i)
		}
		f.deliveries++
		lead := batch[f.lead].row
		f.differ = f.differ || lead.via == d.row.via && !bytes.Equal(lead.sum, d.row.sum)
	}
	slices.SortFunc(leads, func(a, b int) int {
		x, y := batch[a].row.identity(), batch[b].row.identity()
		return cmp.Or(cmp.Compare(x.client, y.client), cmp.Compare(x.source, y.source), cmp.Compare(x.id, y.id))
	})
	p := db.EventInsertBatchParams{}
	for _, i := range leads {
		r := batch[i].row
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
func batchReplies(ctx context.Context, q *db.Queries, batch []*pendingDelivery, folds map[identity]*fold,
	rows []db.EventInsertBatchRow) []batchReply {
	stored := make(map[identity]db.EventInsertBatchRow, len(rows))
	for _, row := range rows {
		stored[identity{row.Client, row.Source, row.SourceEventID}] = row
	}
	type body struct {
		event int64
		sum   string
	}
	keeping := map[body]error{} // conflicting bodies this batch tried to keep
	replies := make([]batchReply, len(batch))
	for i, d := range batch {
		id := d.row.identity()
		row, ok := stored[id]
		if !ok { // cannot happen: the statement returns every row it wrote or updated
			replies[i] = batchReply{err: unavailable(fmt.Errorf("insert events: no row came back for %s/%s", id.source, id.id))}
			continue
		}
		// Only bodies that came the same way are compared (see EventInsertBatch).
		rc := Receipt{EventID: row.ID, Duplicate: !row.Inserted || folds[id].lead != i,
			Conflict: row.Via == d.row.via && !bytes.Equal(row.BodySha256, d.row.sum)}
		replies[i] = batchReply{rc: rc}
		if !rc.Conflict {
			continue
		}
		k := body{row.ID, string(d.row.sum)}
		err, tried := keeping[k]
		if !tried {
			err = q.EventConflictInsert(ctx, db.EventConflictInsertParams{
				Client: d.row.client, EventID: row.ID, Body: d.row.body, BodySha256: d.row.sum, Headers: d.row.headers,
			})
			keeping[k] = err
		}
		if err != nil {
			replies[i] = batchReply{err: storeError(fmt.Errorf("keep conflicting body of event %d: %w", row.ID, err))}
		}
	}
	return replies
}

// storeError is what a caller is told when its delivery could not be stored: the
// database refusing this very row is the row's problem (EINVALID); anything else is
// storage trouble the sender should wait out (EUNAVAILABLE).
func storeError(err error) error {
	if _, refused := db.Refused(err); refused {
		return &Error{Code: EINVALID, Message: "The delivery could not be stored as sent.", Err: err}
	}
	return unavailable(err)
}

func unavailable(err error) error {
	return &Error{Code: EUNAVAILABLE, Message: "Storage is unavailable; retry later.", Err: err}
}
