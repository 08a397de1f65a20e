package inbox

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/batch"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

var batchSource = settings.Source{Name: "stripe-live", Client: "acme", Environment: "live", Provider: ledger.ProviderStripe}

// queued is a delivery as Accept hands it to the inbox's writer.
func queued(t *testing.T, id, body string) eventRow {
	t.Helper()
	row, err := newEventRow(batchSource, ledger.Delivery{ID: id, Type: "checkout.session.completed",
		OccurredAt: time.Unix(1700000000, 0)}, []byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return row
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

func tell(t *testing.T, pool *pgxpool.Pool, replies []batch.Result[ledger.Receipt]) []told {
	t.Helper()
	out := make([]told, len(replies))
	for i, r := range replies {
		if r.Err != nil {
			t.Fatalf("delivery %d: %v", i, r.Err)
		}
		rc := r.Value
		var id string
		if err := pool.QueryRow(context.Background(), `SELECT source_event_id FROM events WHERE id = $1`, rc.EventID).Scan(&id); err != nil {
			t.Fatalf("event %d: %v", rc.EventID, err)
		}
		out[i] = told{Event: id, Duplicate: rc.Duplicate, Conflict: rc.Conflict}
	}
	return out
}

// storedEvent is an events row as the batch tests compare it.
type storedEvent struct {
	ID         string
	Deliveries int
	Conflict   bool
	Body       string
}

// storedEvents reads the events, by delivery id.
func storedEvents(t *testing.T, pool *pgxpool.Pool) []storedEvent {
	t.Helper()
	rows, err := pool.Query(context.Background(),
		`SELECT e.source_event_id, e.deliveries, e.conflict, convert_from(b.body, 'UTF8') FROM events e
		JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day ORDER BY e.source_event_id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var s storedEvent
		if err := rows.Scan(&s.ID, &s.Deliveries, &s.Conflict, &s.Body); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestBatchFoldsRepeats(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	// One identity three times in one batch (once with another body), one other.
	rcs, err := writeBatch(ctx, pool, store.For(pool), []eventRow{
		queued(t, "evt_a", `{"id":"evt_a","v":1}`),
		queued(t, "evt_a", `{"id":"evt_a","v":1}`),
		queued(t, "evt_b", `{"id":"evt_b"}`),
		queued(t, "evt_a", `{"id":"evt_a","v":2}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if !storedNew(rcs) {
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
	wantRows := []storedEvent{
		{ID: "evt_a", Deliveries: 3, Conflict: true, Body: `{"id":"evt_a","v":1}`},
		{ID: "evt_b", Deliveries: 1, Body: `{"id":"evt_b"}`},
	}
	if diff := cmp.Diff(wantRows, storedEvents(t, pool)); diff != "" {
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
	if _, err := writeBatch(ctx, pool, store.For(pool), []eventRow{queued(t, "evt_c", `{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	// Two repeats with the same changed body, and one faithful repeat, together.
	rcs, err := writeBatch(ctx, pool, store.For(pool), []eventRow{
		queued(t, "evt_c", `{"v":2}`),
		queued(t, "evt_c", `{"v":1}`),
		queued(t, "evt_c", `{"v":2}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if storedNew(rcs) {
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
	if n := count(t, pool, `SELECT count(*) FROM events e JOIN event_bodies b
		ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day WHERE e.conflict AND b.body = $1`, []byte(`{"v":1}`)); n != 1 {
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
	if _, err := writeBatch(ctx, pool, store.For(pool), []eventRow{queued(t, "evt_k", `{"v":1}`)}); err != nil {
		t.Fatal(err)
	}
	// On Citus a trigger on a distributed table is one each shard runs, allowed
	// by enable_unsafe_triggers (a placeholder setting on a single Postgres).
	err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'disk full'; END $$`)
		if err == nil {
			_, err = tx.Exec(ctx, `SET LOCAL citus.enable_unsafe_triggers = on`)
		}
		if err == nil {
			_, err = tx.Exec(ctx, `CREATE TRIGGER refuse BEFORE INSERT ON event_conflicts FOR EACH ROW EXECUTE FUNCTION refuse()`)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	in, g := gatedInbox(t, pool, nil, 8)
	var codes []string
	for _, r := range together(t, in, g,
		queued(t, "evt_a", `{"n":1}`),
		queued(t, "evt_k", `{"v":2}`), // conflicts with the stored body
		queued(t, "evt_b", `{"n":2}`),
	) {
		codes = append(codes, ledger.ErrorCode(r.Err))
	}
	if diff := cmp.Diff([]string{"", ledger.EUNAVAILABLE, ""}, codes); diff != "" {
		t.Errorf("error codes (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 1, 2}, deliveries(t, pool)); diff != "" {
		t.Errorf("deliveries of evt_a, evt_b, evt_k (-want +got):\n%s", diff)
	}
	// The sender's retry keeps the body.
	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SET LOCAL citus.enable_unsafe_triggers = on`)
		if err == nil {
			_, err = tx.Exec(ctx, `DROP TRIGGER refuse ON event_conflicts`)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	replies, err := writeBatch(ctx, pool, store.For(pool), []eventRow{queued(t, "evt_k", `{"v":2}`)})
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
	in, g := gatedInbox(t, pool, nil, 8)
	var codes []string
	for _, r := range together(t, in, g,
		queued(t, "evt_1", `{"n":1}`),
		queued(t, "evt_poison", `{"n":2}`),
		queued(t, "evt_3", `{"n":3}`),
	) {
		codes = append(codes, ledger.ErrorCode(r.Err))
	}
	if diff := cmp.Diff([]string{"", ledger.EINVALID, ""}, codes); diff != "" {
		t.Errorf("error codes (-want +got):\n%s", diff)
	}
	if n := count(t, pool, `SELECT count(*) FROM events`); n != 2 {
		t.Errorf("%d events stored, want the 2 good ones", n)
	}
}

var discardLogger = slog.New(slog.DiscardHandler)

// placeholder is the delivery a gate holds: its write stores nothing.
const placeholder = "evt_placeholder"

// gate holds an inbox's one writer on a placeholder delivery, so that what is
// submitted meanwhile queues up for one batch.
type gate struct {
	held chan struct{} // closed when the placeholder's write begins
	open func()        // lets it finish, once
}

// gatedInbox returns an inbox with one writer, batches of up to size and an hour's
// wait for company, whose writer is held by the gate until the gate opens.
func gatedInbox(t *testing.T, pool *pgxpool.Pool, metrics *metrics.Metrics, size int) (*Inbox, *gate) {
	t.Helper()
	opened := make(chan struct{})
	g := &gate{held: make(chan struct{}), open: sync.OnceFunc(func() { close(opened) })}
	in := newInbox(pool, discardLogger, metrics, func(p *batch.Params[eventRow, ledger.Receipt]) {
		p.Size, p.Wait, p.Writers = size, time.Hour, 1
		write := p.Write
		p.Write = func(ctx context.Context, rows []eventRow) ([]batch.Result[ledger.Receipt], error) {
			if len(rows) == 1 && rows[0].sourceEventID == placeholder {
				close(g.held)
				<-opened
				return make([]batch.Result[ledger.Receipt], 1), nil
			}
			return write(ctx, rows)
		}
	})
	t.Cleanup(in.Close)
	t.Cleanup(g.open) // before Close, which waits for the held write
	row := queued(t, placeholder, `{}`)
	go func() { _, _ = in.accept(context.Background(), row) }() // stores nothing
	<-g.held
	return in, g
}

// submit hands row to in's writer as Accept does, without waiting for the answer.
func submit(in *Inbox, ctx context.Context, row eventRow) <-chan batch.Result[ledger.Receipt] {
	r := make(chan batch.Result[ledger.Receipt], 1)
	go func() {
		rc, err := in.accept(ctx, row)
		r <- batch.Result[ledger.Receipt]{Value: rc, Err: err}
	}()
	return r
}

// queue submits each row once the one before it is queued behind the gate, so
// that they queue in order.
func queue(t *testing.T, in *Inbox, rows ...eventRow) []<-chan batch.Result[ledger.Receipt] {
	t.Helper()
	var out []<-chan batch.Result[ledger.Receipt]
	for _, row := range rows {
		before := in.writer.Queued()
		out = append(out, submit(in, context.Background(), row))
		waitQueued(t, in, before+1)
	}
	return out
}

// waitQueued waits until n deliveries are queued for in's writer.
func waitQueued(t *testing.T, in *Inbox, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for in.writer.Queued() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d deliveries queued after 10s, want %d", in.writer.Queued(), n)
		}
		runtime.Gosched()
	}
}

// together queues rows behind the gate, opens it and returns what each sender was
// told, in order: the rows are written as one batch.
func together(t *testing.T, in *Inbox, g *gate, rows ...eventRow) []batch.Result[ledger.Receipt] {
	t.Helper()
	replies := queue(t, in, rows...)
	g.open()
	out := make([]batch.Result[ledger.Receipt], len(replies))
	for i, r := range replies {
		out[i] = <-r
	}
	return out
}

func TestBatchSkipsCallersThatLeft(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	in, g := gatedInbox(t, pool, nil, 8)
	ctx, cancel := context.WithCancel(context.Background())
	gone := submit(in, ctx, queued(t, "evt_gone", `{}`))
	waitQueued(t, in, 1)
	stay := queue(t, in, queued(t, "evt_stay", `{}`))[0]
	cancel() // told 503 before its batch is written: storing it would surprise its retry
	if r := <-gone; ledger.ErrorCode(r.Err) != ledger.EUNAVAILABLE {
		t.Errorf("the sender that left: %v, want %s", r.Err, ledger.EUNAVAILABLE)
	}
	g.open()
	if r := <-stay; r.Err != nil {
		t.Fatal(r.Err)
	}
	if n := count(t, pool, `SELECT count(*) FROM events WHERE source_event_id = 'evt_gone'`); n != 0 {
		t.Errorf("a delivery whose sender was told 503 was stored")
	}
}

func TestInboxCloseFlushes(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	// Deliveries that wait an hour for company behind a batch being written: only
	// Close writes them.
	in, g := gatedInbox(t, pool, nil, 1000)
	var rows []eventRow
	for _, id := range []string{"evt_1", "evt_2", "evt_2", "evt_3"} {
		rows = append(rows, queued(t, id, `{"id":"`+id+`"}`))
	}
	replies := queue(t, in, rows...)
	closed := make(chan struct{})
	go func() { in.Close(); close(closed) }()
	// Close refuses new deliveries at once (a sender that already left is refused
	// either way, without being queued), then writes the queued ones as soon as the
	// batch being written is done.
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	refused := func() bool {
		_, err := in.Accept(gone, batchSource, ledger.Delivery{ID: "evt_gone"}, []byte(`{}`))
		return errors.Is(err, batch.ErrClosed)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !refused() {
		if time.Now().After(deadline) {
			t.Fatal("Close did not stop taking deliveries")
		}
		runtime.Gosched()
	}
	if n := count(t, pool, `SELECT count(*) FROM events`); n != 0 {
		t.Fatalf("%d events written while a batch was being written, want 0 (the test's premise)", n)
	}
	g.open()
	<-closed
	firsts := map[string]int{} // identity -> replies saying it was new
	for _, reply := range replies {
		r := <-reply
		if r.Err != nil {
			t.Fatalf("queued before Close, refused: %v", r.Err)
		}
		got := tell(t, pool, []batch.Result[ledger.Receipt]{r})[0]
		if !got.Duplicate {
			firsts[got.Event]++
		}
	}
	if diff := cmp.Diff(map[string]int{"evt_1": 1, "evt_2": 1, "evt_3": 1}, firsts); diff != "" {
		t.Errorf("first deliveries per identity (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]int{1, 2, 1}, deliveries(t, pool)); diff != "" {
		t.Errorf("deliveries per event (-want +got):\n%s", diff)
	}
	_, err := in.Accept(context.Background(), batchSource, ledger.Delivery{ID: "evt_late"}, []byte(`{}`))
	if ledger.ErrorCode(err) != ledger.EUNAVAILABLE {
		t.Errorf("Accept after Close: %v, want %s", err, ledger.EUNAVAILABLE)
	}
	in.Close() // a second Close is harmless
}

// With no batch being written, a delivery is written at once: it does not wait
// for company that may never come.
func TestInboxWritesALoneDeliveryAtOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	in := newInbox(pool, discardLogger, nil, func(p *batch.Params[eventRow, ledger.Receipt]) { p.Size, p.Wait = 8, time.Hour })
	t.Cleanup(in.Close)
	for i := range 3 { // one after another, each alone
		id := fmt.Sprintf("evt_lone_%d", i)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		rc, err := in.Accept(ctx, batchSource, ledger.Delivery{ID: id}, []byte(`{"id":"`+id+`"}`))
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
	metrics := metrics.New(pool)
	// Eight deliveries arrive while a batch is being written: they fill one batch,
	// which is written without waiting out the hour once the slot is free: one
	// statement, so one transaction wrote every row, and one group commit of 8.
	in, g := gatedInbox(t, pool, metrics, 8)
	var rows []eventRow
	for i := range 8 {
		id := "evt_" + string(rune('a'+i%4))
		rows = append(rows, queued(t, id, `{"id":"`+id+`"}`))
	}
	firsts := 0
	for _, r := range together(t, in, g, rows...) {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if !r.Value.Duplicate {
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
func batchSizes(t *testing.T, m *metrics.Metrics) (uint64, float64) {
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

// A delivery's bytes live apart from its inbox row, in event_bodies (migration
// 00038), compressed with lz4 where the server has it: the row's later versions
// (its routing, its repeats) carry no copy of them, and the repeat writes no second
// copy. They come back byte for byte.
func TestInboxKeepsBodiesApartFromTheRow(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	in := newInbox(pool, discardLogger, nil, nil)
	t.Cleanup(in.Close)
	// A checkout of 30 line items: about 2.6 KB that compresses to about half.
	var items strings.Builder
	for i := range 30 {
		sum := sha256.Sum256([]byte{byte(i)})
		fmt.Fprintf(&items, `{"id":"li_%05d","price":"price_%x","quantity":%d,"description":"Course seat %d"},`,
			i, sum[:6], 1+i%3, i)
	}
	body := `{"id":"evt_big","type":"checkout.session.completed","data":{"object":{"line_items":[` +
		strings.TrimSuffix(items.String(), ",") + `]}}}`
	// The second delivery is a repeat: it writes a new version of the row (deliveries 2).
	for range 2 {
		if _, err := in.Accept(context.Background(), batchSource, ledger.Delivery{ID: "evt_big", Type: "checkout.session.completed"},
			[]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	var (
		deliveries, copies int
		stored, inRow      []byte
		compression        *string
	)
	if err := pool.QueryRow(context.Background(), `SELECT e.deliveries, b.body, pg_column_compression(b.body), e.body,
		(SELECT count(*) FROM event_bodies x WHERE x.client = e.client AND x.event_id = e.id)
		FROM events e JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
		WHERE e.source_event_id = 'evt_big'`).Scan(&deliveries, &stored, &compression, &inRow, &copies); err != nil {
		t.Fatal(err)
	}
	if string(stored) != body || deliveries != 2 || copies != 1 || inRow != nil {
		t.Fatalf("stored %d bytes in %d copies over %d deliveries, %d in the row; want the %d bytes sent, once, twice delivered, none in the row",
			len(stored), copies, deliveries, len(inRow), len(body))
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
