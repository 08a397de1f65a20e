package ledger

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
)

var batchSource = Source{Name: "stripe-live", Client: "acme", Environment: "live", Provider: ProviderStripe}

// queued is a delivery handed to the batcher as Accept would, without waiting.
func queued(t *testing.T, id, body string) *pendingDelivery {
	t.Helper()
	row, err := newEventRow(batchSource, Delivery{ID: id, Type: "checkout.session.completed",
		OccurredAt: time.Unix(1700000000, 0)}, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return &pendingDelivery{ctx: context.Background(), row: row, reply: make(chan batchReply, 1)}
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// receipts compares what each sender is told, with event ids replaced by the
// delivery identity they belong to.
type told struct {
	Event     string
	Duplicate bool
	Conflict  bool
}

func tell(t *testing.T, pool *pgxpool.Pool, replies []batchReply) []told {
	t.Helper()
	out := make([]told, len(replies))
	for i, r := range replies {
		if r.err != nil {
			t.Fatalf("delivery %d: %v", i, r.err)
		}
		rc := r.rc
		var id string
		if err := pool.QueryRow(context.Background(), `SELECT source_event_id FROM events WHERE id = $1`, rc.EventID).Scan(&id); err != nil {
			t.Fatalf("event %d: %v", rc.EventID, err)
		}
		out[i] = told{Event: id, Duplicate: rc.Duplicate, Conflict: rc.Conflict}
	}
	return out
}

func TestBatchFoldsRepeats(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	// One identity three times in one batch (once with another body), one other.
	rcs, storedNew, err := writeBatch(ctx, pool, []*pendingDelivery{
		queued(t, "evt_a", `{"id":"evt_a","v":1}`),
		queued(t, "evt_a", `{"id":"evt_a","v":1}`),
		queued(t, "evt_b", `{"id":"evt_b"}`),
		queued(t, "evt_a", `{"id":"evt_a","v":2}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !storedNew {
		t.Error("a batch of two new events: told it stored none, so the routers would not be woken")
	}
	want := []told{
		{Event: "evt_a"},
		{Event: "evt_a", Duplicate: true},
		{Event: "evt_b"},
		{Event: "evt_a", Duplicate: true, Conflict: true},
	}
	if diff := cmp.Diff(want, tell(t, pool, rcs)); diff != "" {
		t.Errorf("receipts (-want +got):\n%s", diff)
	}
	type stored struct {
		ID         string
		Deliveries int
		Conflict   bool
		Body       string
	}
	var got []stored
	rows, err := pool.Query(ctx, `SELECT source_event_id, deliveries, conflict, convert_from(body, 'UTF8') FROM events ORDER BY source_event_id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s stored
		if err := rows.Scan(&s.ID, &s.Deliveries, &s.Conflict, &s.Body); err != nil {
			t.Fatal(err)
		}
		got = append(got, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	wantRows := []stored{
		{ID: "evt_a", Deliveries: 3, Conflict: true, Body: `{"id":"evt_a","v":1}`},
		{ID: "evt_b", Deliveries: 1, Body: `{"id":"evt_b"}`},
	}
	if diff := cmp.Diff(wantRows, got); diff != "" {
		t.Errorf("stored events (-want +got):\n%s", diff)
	}
	if n := count(t, pool, `SELECT count(*) FROM event_conflicts WHERE body = $1`, []byte(`{"id":"evt_a","v":2}`)); n != 1 {
		t.Errorf("conflicting body kept %d times, want 1", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM events WHERE occurred_at = to_timestamp(1700000000)`); n != 2 {
		t.Errorf("%d events kept the provider's time, want 2", n)
	}
}

func TestBatchConflictsWithStoredRow(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, _, err := writeBatch(ctx, pool, []*pendingDelivery{queued(t, "evt_c", `{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	// Two repeats with the same changed body, and one faithful repeat, together.
	rcs, stored, err := writeBatch(ctx, pool, []*pendingDelivery{
		queued(t, "evt_c", `{"v":2}`),
		queued(t, "evt_c", `{"v":1}`),
		queued(t, "evt_c", `{"v":2}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if stored {
		t.Error("a batch of repeats only: told it stored a new event, so the routers would be woken for nothing")
	}
	want := []told{
		{Event: "evt_c", Duplicate: true, Conflict: true},
		{Event: "evt_c", Duplicate: true},
		{Event: "evt_c", Duplicate: true, Conflict: true},
	}
	if diff := cmp.Diff(want, tell(t, pool, rcs)); diff != "" {
		t.Errorf("receipts (-want +got):\n%s", diff)
	}
	if n := count(t, pool, `SELECT deliveries FROM events`); n != 4 {
		t.Errorf("deliveries = %d, want 4", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM events WHERE conflict AND body = $1`, []byte(`{"v":1}`)); n != 1 {
		t.Errorf("the original body must stay, flagged as a conflict")
	}
	if n := count(t, pool, `SELECT count(*) FROM event_conflicts`); n != 1 {
		t.Errorf("%d conflicting bodies kept, want 1 (the same body once)", n)
	}
}

// A conflicting body that cannot be kept after the batch has committed fails only
// its own delivery, with 503 so that its sender retries; the batch is not written
// again, so no delivery in it is counted twice.
func TestBatchConflictBodyNotKept(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, _, err := writeBatch(ctx, pool, []*pendingDelivery{queued(t, "evt_k", `{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `
CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$;
CREATE TRIGGER refuse BEFORE INSERT ON event_conflicts FOR EACH ROW EXECUTE FUNCTION refuse();`); err != nil {
		t.Fatal(err)
	}
	b := newBatcher(pool, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, batchParams{})
	t.Cleanup(b.close)
	batch := []*pendingDelivery{
		queued(t, "evt_a", `{"n":1}`),
		queued(t, "evt_k", `{"v":2}`), // conflicts with the stored body
		queued(t, "evt_b", `{"n":2}`),
	}
	b.flush(batch)
	var codes []string
	for _, d := range batch {
		r := <-d.reply
		codes = append(codes, ErrorCode(r.err))
	}
	if diff := cmp.Diff([]string{"", EUNAVAILABLE, ""}, codes); diff != "" {
		t.Errorf("error codes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 1, 2}, deliveries(t, pool)); diff != "" {
		t.Errorf("deliveries of evt_a, evt_b, evt_k (-want +got):\n%s", diff)
	}
	// The sender's retry keeps the body.
	if _, err := pool.Exec(ctx, `DROP TRIGGER refuse ON event_conflicts`); err != nil {
		t.Fatal(err)
	}
	replies, _, err := writeBatch(ctx, pool, []*pendingDelivery{queued(t, "evt_k", `{"v":2}`)})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]told{{Event: "evt_k", Duplicate: true, Conflict: true}}, tell(t, pool, replies)); diff != "" {
		t.Errorf("the retry's receipt (-want +got):\n%s", diff)
	}
	if n := count(t, pool, `SELECT count(*) FROM event_conflicts WHERE body = $1`, []byte(`{"v":2}`)); n != 1 {
		t.Errorf("%d conflicting bodies kept after the retry, want 1", n)
	}
}

func TestBatchIsolatesBadRow(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	// A row the database refuses on its own, though it passed every check before.
	if _, err := pool.Exec(ctx, `ALTER TABLE events ADD CONSTRAINT no_poison CHECK (source_event_id <> 'evt_poison')`); err != nil {
		t.Fatal(err)
	}
	b := newBatcher(pool, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, batchParams{})
	t.Cleanup(b.close)
	batch := []*pendingDelivery{
		queued(t, "evt_1", `{"n":1}`),
		queued(t, "evt_poison", `{"n":2}`),
		queued(t, "evt_3", `{"n":3}`),
	}
	b.flush(batch)
	var codes []string
	for _, d := range batch {
		r := <-d.reply
		codes = append(codes, ErrorCode(r.err))
	}
	if diff := cmp.Diff([]string{"", EINVALID, ""}, codes); diff != "" {
		t.Errorf("error codes (-want +got):\n%s", diff)
	}
	if n := count(t, pool, `SELECT count(*) FROM events`); n != 2 {
		t.Errorf("%d events stored, want the 2 good ones", n)
	}
}

func TestBatchSkipsCallersThatLeft(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	b := newBatcher(pool, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, batchParams{})
	t.Cleanup(b.close)
	gone := queued(t, "evt_gone", `{}`)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	gone.ctx = ctx // already told 503: storing it would surprise its retry
	stay := queued(t, "evt_stay", `{}`)
	b.flush([]*pendingDelivery{gone, stay})
	if r := <-stay.reply; r.err != nil {
		t.Fatal(r.err)
	}
	if n := count(t, pool, `SELECT count(*) FROM events WHERE source_event_id = 'evt_gone'`); n != 0 {
		t.Errorf("a delivery whose sender was told 503 was stored")
	}
}

// isClosed tells whether close has begun.
func (b *batcher) isClosed() bool {
	b.mu.RLock()
	defer b.mu.RUnlock()
	return b.closed
}

// holdWriting makes the batcher of in believe a batch is being written, in its only
// slot, until release: what arrives meanwhile waits for company.
func holdWriting(in *Inbox) (release func()) {
	in.batch.slots <- struct{}{}
	return func() { <-in.batch.slots }
}

func TestInboxCloseFlushes(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	// Batches that wait an hour for company behind a batch being written: only
	// Close writes them.
	in := newInbox(pool, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, batchParams{size: 1000, wait: time.Hour, flushers: 1})
	release := holdWriting(in)
	var batch []*pendingDelivery
	for _, id := range []string{"evt_1", "evt_2", "evt_2", "evt_3"} {
		d := queued(t, id, `{"id":"`+id+`"}`)
		if err := in.batch.submit(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, d)
	}
	closed := make(chan struct{})
	go func() { in.Close(); close(closed) }()
	// Close refuses new deliveries at once, then writes the queued ones as soon as
	// the batch being written is done.
	deadline := time.Now().Add(10 * time.Second)
	for !in.batch.isClosed() {
		if time.Now().After(deadline) {
			t.Fatal("Close did not stop taking deliveries")
		}
		runtime.Gosched()
	}
	if n := count(t, pool, `SELECT count(*) FROM events`); n != 0 {
		t.Fatalf("%d events written while a batch was being written, want 0 (the test's premise)", n)
	}
	release()
	<-closed
	firsts := map[string]int{} // identity -> replies saying it was new
	for _, d := range batch {
		r := <-d.reply
		if r.err != nil {
			t.Fatalf("queued before Close, refused: %v", r.err)
		}
		got := tell(t, pool, []batchReply{r})[0]
		if !got.Duplicate {
			firsts[got.Event]++
		}
	}
	// Close may write the queue as more than one batch, in either order.
	if diff := cmp.Diff(map[string]int{"evt_1": 1, "evt_2": 1, "evt_3": 1}, firsts); diff != "" {
		t.Errorf("first deliveries per identity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2, 1}, deliveries(t, pool)); diff != "" {
		t.Errorf("deliveries per event (-want +got):\n%s", diff)
	}
	_, err := in.Accept(context.Background(), batchSource, Delivery{ID: "evt_late"}, []byte(`{}`))
	if ErrorCode(err) != EUNAVAILABLE {
		t.Errorf("Accept after Close: %v, want %s", err, EUNAVAILABLE)
	}
	in.Close() // a second Close is harmless
}

// With no batch being written, a delivery is written at once: it does not wait
// for company that may never come.
func TestInboxWritesALoneDeliveryAtOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	in := newInbox(pool, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, batchParams{size: 8, wait: time.Hour})
	t.Cleanup(in.Close)
	for i := range 3 { // one after another, each alone
		id := fmt.Sprintf("evt_lone_%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rc, err := in.Accept(ctx, batchSource, Delivery{ID: id}, []byte(`{"id":"`+id+`"}`))
		cancel()
		if err != nil {
			t.Fatalf("a lone delivery, with an hour's wait for company: %v", err)
		}
		if rc.Duplicate {
			t.Errorf("%s: told duplicate, want new", id)
		}
	}
	if n := count(t, pool, `SELECT count(DISTINCT xmin::text) FROM events`); n != 3 {
		t.Errorf("three lone deliveries written by %d transactions, want 3", n)
	}
}

func TestInboxAcceptsTogether(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	metrics := NewMetrics(pool)
	in := newInbox(pool, slog.New(slog.NewTextHandler(io.Discard, nil)), metrics, batchParams{size: 8, wait: time.Hour, flushers: 1})
	t.Cleanup(in.Close)
	// Eight deliveries arrive while a batch is being written: they fill one batch,
	// which is written without waiting out the hour once the slot is free: one
	// statement, so one transaction wrote every row, and one group commit of 8.
	release := holdWriting(in)
	var batch []*pendingDelivery
	for i := range 8 {
		id := "evt_" + string(rune('a'+i%4))
		d := queued(t, id, `{"id":"`+id+`"}`)
		if err := in.batch.submit(context.Background(), d); err != nil {
			t.Fatal(err)
		}
		batch = append(batch, d)
	}
	release()
	firsts := 0
	for _, d := range batch {
		r := <-d.reply
		if r.err != nil {
			t.Fatal(r.err)
		}
		if !r.rc.Duplicate {
			firsts++
		}
	}
	if firsts != 4 {
		t.Errorf("%d first deliveries, want 4", firsts)
	}
	if diff := cmp.Diff([]int{2, 2, 2, 2}, deliveries(t, pool), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("deliveries per event (-want +got):\n%s", diff)
	}
	if n := count(t, pool, `SELECT count(DISTINCT xmin::text) FROM events`); n != 1 {
		t.Errorf("the events were written by %d transactions, want 1", n)
	}
	commits, size := batchSizes(t, metrics)
	if commits != 1 || size != 8 {
		t.Errorf("oncehook_ingest_batch_size observed %d commits of %v deliveries in all, want 1 of 8", commits, size)
	}
}

// batchSizes reads oncehook_ingest_batch_size: how many group commits it observed
// and the deliveries they wrote in all.
func batchSizes(t *testing.T, m *Metrics) (uint64, float64) {
	t.Helper()
	families, err := m.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == "oncehook_ingest_batch_size" {
			h := f.GetMetric()[0].GetHistogram()
			return h.GetSampleCount(), h.GetSampleSum()
		}
	}
	t.Fatal("oncehook_ingest_batch_size is not registered")
	return 0, 0
}

func deliveries(t *testing.T, pool *pgxpool.Pool) []int {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT deliveries FROM events ORDER BY source_event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var n int
		if err := rows.Scan(&n); err != nil {
			t.Fatal(err)
		}
		out = append(out, n)
	}
	return out
}

// A large delivery's body lives out of its inbox row, compressed with lz4 where the
// server has it (migration 00015): the row's later versions (its routing, its
// repeats) carry a pointer to the body, not a copy. It comes back byte for byte.
func TestInboxKeepsBodiesOutOfTheRow(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	in := newInbox(pool, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, batchParams{})
	t.Cleanup(in.Close)
	// A checkout of 30 line items: about 2.6 KB that compresses to about half, so
	// the default would keep it whole in the row, compressed.
	var items strings.Builder
	for i := range 30 {
		sum := sha256.Sum256([]byte{byte(i)})
		fmt.Fprintf(&items, `{"id":"li_%05d","price":"price_%x","quantity":%d,"description":"Course seat %d"},`,
			i, sum[:6], 1+i%3, i)
	}
	body := `{"id":"evt_big","type":"checkout.session.completed","data":{"object":{"line_items":[` +
		strings.TrimSuffix(items.String(), ",") + `]}}}`
	if _, err := in.Accept(context.Background(), batchSource, Delivery{ID: "evt_big", Type: "checkout.session.completed"},
		[]byte(body)); err != nil {
		t.Fatal(err)
	}
	// The repeat writes a new version of the row (deliveries 2).
	if _, err := in.Accept(context.Background(), batchSource, Delivery{ID: "evt_big", Type: "checkout.session.completed"},
		[]byte(body)); err != nil {
		t.Fatal(err)
	}
	var (
		deliveries  int
		stored      []byte
		compression *string
	)
	if err := pool.QueryRow(context.Background(), `SELECT deliveries, body, pg_column_compression(body)
		FROM events WHERE source_event_id = 'evt_big'`).Scan(&deliveries, &stored, &compression); err != nil {
		t.Fatal(err)
	}
	if string(stored) != body || deliveries != 2 {
		t.Fatalf("stored %d bytes over %d deliveries, want the %d bytes sent, twice", len(stored), deliveries, len(body))
	}
	var toast string
	if err := pool.QueryRow(context.Background(), `SELECT reltoastrelid::regclass::text FROM pg_class
		WHERE oid = 'events'::regclass`).Scan(&toast); err != nil {
		t.Fatal(err)
	}
	if chunks := count(t, pool, `SELECT count(*) FROM `+toast); chunks == 0 {
		t.Errorf("the %d-byte body is kept in its inbox row: no chunk of it in %s", len(body), toast)
	}
	lz4 := true
	if _, err := pool.Exec(context.Background(), `SET default_toast_compression = lz4`); err != nil {
		lz4 = false // a server built without lz4: the migration keeps the default
	}
	if lz4 && (compression == nil || *compression != "lz4") {
		t.Errorf("the body is compressed with %v, want lz4 (the server has it)", ptrText(compression))
	}
}

func ptrText(s *string) string {
	if s == nil {
		return "nothing"
	}
	return *s
}
