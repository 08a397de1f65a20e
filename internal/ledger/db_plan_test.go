package ledger_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/partitions"
)

// A statement sent through db.PlannedPerCall is not kept as a prepared statement of
// the connection, so Postgres plans it for each call's own arguments; sent directly,
// pgx prepares it once and Postgres may reuse a generic plan.
func TestPlannedPerCallPreparesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	fillActions(t, pool, 1, 30, `(ARRAY['pending','failed','confirmed'])[1 + i % 3]`)
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	prepared := func() int {
		t.Helper()
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_prepared_statements
			WHERE statement LIKE '%name: ' || 'ActionCountByState%'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	planned := db.New(db.PlannedPerCall(conn))
	var got []db.ActionCountByStateRow
	for range 6 { // past the fifth call, after which Postgres would consider a generic plan
		if got, err = countOneClient(ctx, planned); err != nil {
			t.Fatal(err)
		}
	}
	if n := prepared(); n != 0 {
		t.Errorf("after calls planned per call: %d prepared statements, want 0", n)
	}
	want, err := countOneClient(ctx, db.New(conn))
	if err != nil {
		t.Fatal(err)
	}
	if n := prepared(); n != 1 {
		t.Errorf("after a direct call: %d prepared statements, want 1 (the test's premise)", n)
	}
	if len(got) != 3 || len(got) != len(want) {
		t.Fatalf("counts by state: planned per call %v, direct %v; want 3 states each", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("counts by state: planned per call %v, direct %v", got, want)
		}
	}
}

// countOneClient is ActionCountByState, or on Citus its form for client c0 alone:
// one statement at a time, as one connection takes them.
func countOneClient(ctx context.Context, q *db.Queries) ([]db.ActionCountByStateRow, error) {
	if !dbtest.OnCitus() {
		return q.ActionCountByState(ctx)
	}
	return db.ActionCountByClient(ctx, q, []string{"c0"}, nil)
}

// The router's statements are planned per call. On a new database the router's first
// claims run against empty tables; prepared, the claim's generic plan (a sequential
// scan of the inbox) would be kept while a burst fills it, until autovacuum analyzes
// the tables, about a minute later: 130 ms per claim of 50 with 30,000 events
// against 0.5 ms planned per call, so a burst drained at 400 events a second.
func TestRouterKeepsNoPreparedPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, worldOptions{noEngine: true})
	eng := engine.New(engine.Params{Pool: w.pool, Config: w.cfg,
		Clients: destination.NewClients(w.cfg)})
	for i := range 8 { // past the fifth call, after which Postgres would consider a generic plan
		w.deliver(checkout{eventID: fmt.Sprintf("evt_plan_%d", i), enquiry: fmt.Sprintf("enq-plan-%d", i), amount: 100})
		if _, err := eng.RouteBatch(ctx, 50); err != nil {
			t.Fatal(err)
		}
	}
	conns := w.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for _, c := range conns {
		var names []string
		rows, err := c.Query(ctx, `SELECT substring(statement from 'name: (\w+)') FROM pg_prepared_statements
			WHERE statement ~ 'name: (EventClaimReceived|EventSetStatuses|ActionInsert|ActionEventLinks)\M'`)
		if err != nil {
			t.Fatal(err)
		}
		if names, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			t.Fatal(err)
		}
		if len(names) > 0 {
			t.Errorf("the router's statements %v are prepared on a connection; want them planned per call", names)
		}
	}
	var routed int
	if err := w.pool.QueryRow(ctx, `SELECT count(*) FROM events WHERE status = 'routed'`).Scan(&routed); err != nil {
		t.Fatal(err)
	}
	if routed != 8 {
		t.Errorf("%d events routed, want 8", routed)
	}
}

// The performer's claim reuses one generic plan per connection, made with index
// paths only (db.IndexPlanned). Made on a new database, and kept while a
// burst fills the actions table, it still reads the queue from the head of
// actions_due_idx (as many rows as it claims, not the whole table), and updates
// each claimed row looked up by its key, not by a scan of the client's actions.
// (The plan it replaced, made the same way without the index-only settings,
// scanned and sorted the whole table; a claim whose update named the client read
// every action of the client for each claim.) auto_explain shows the plan the
// claim ran with.
func TestPerformerClaimPlanReadsTheQueueHead(t *testing.T) {
	dbtest.SinglePostgresOnly(t, "it reads the performer's single-Postgres plan (on Citus each shard plans its statement)")
	t.Parallel()
	ctx := context.Background()
	_, dsn := dbtest.NewDSN(t)
	plans := &explainedPlans{}
	conn := explainingConn(t, dsn, plans)
	params := db.ActionClaimParams{Client: "c", Callable: []string{"d0"}, FillNames: []string{}, OnlyDestinations: []string{},
		SkipDestinations: []string{}, MaxActions: 16, Worker: "w1", LeaseSeconds: 30}
	claim := func() []db.ActionClaimRow {
		t.Helper()
		return rowsIn(t, db.IndexPlanned, conn, func(q *db.Queries) ([]db.ActionClaimRow, error) {
			return q.ActionClaim(ctx, params)
		})
	}
	// A performer's first claims, on a new database (a plan kept would be made
	// now), then what autovacuum may have seen of it: a few actions, all done.
	for range 6 {
		if got := claim(); len(got) != 0 {
			t.Fatalf("claimed %d actions, none due", len(got))
		}
	}
	if _, err := conn.Exec(ctx, `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, max_attempts, give_up_at)
SELECT 'c', 'live', 's', 'n', 'enq_done_' || i, '[]', 'op_done_' || i, 'd0', '{}', '\x00', 'confirmed', 3,
       now() + interval '1 hour'
FROM generate_series(1, 100) AS i`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, `ANALYZE actions`); err != nil {
		t.Fatal(err)
	}
	if got := claim(); len(got) != 0 {
		t.Fatalf("claimed %d actions, none due", len(got))
	}
	if _, err := conn.Exec(ctx, `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, max_attempts, give_up_at, next_attempt_at)
SELECT 'c', 'live', 's', 'n', 'enq_' || i, '[]', 'op_' || i, 'd0', '{}', '\x00', 3,
       now() + interval '1 hour', timestamptz '2026-01-01' + make_interval(secs => i)
FROM generate_series(1, 20000) AS i`); err != nil {
		t.Fatal(err)
	}
	got := claim()
	plan, root := plans.last(t, "-- name: ActionClaim :many")
	for _, bad := range []string{`"Node Type": "Seq Scan"`, `"Node Type": "Sort"`, `"Node Type": "Bitmap Heap Scan"`} {
		if strings.Contains(plan, bad) {
			t.Errorf("the claim plan has a %s: %s", bad, plan)
		}
	}
	if read := dueIndexRows(t, root, plan); read != 16 {
		t.Errorf("the claim plan read %d rows of actions_due_idx to claim 16; want 16: %s", read, plan)
	}
	// The update finds each claimed row by its key, not by a scan of the client's
	// actions.
	if read := actionsRowsRead(root); read > 2*16 {
		t.Errorf("the claim plan read %d rows of actions to claim 16; want at most 32: %s", read, plan)
	}
	if len(got) != 16 {
		t.Fatalf("claimed %d of 20,000 due actions, want 16", len(got))
	}
	for i, r := range got {
		if want := fmt.Sprintf("op_%d", i+1); r.OperationKey != want || r.State != ledger.StateProcessing {
			t.Errorf("claim %d: %s in state %s, want %s (the oldest due first) processing", i, r.OperationKey, r.State, want)
		}
	}
}

// explainedPlans keeps the plans auto_explain sent a connection (explainingConn)
// as notices, each with the statement it ran.
type explainedPlans struct {
	mu    sync.Mutex
	plans []string
}

func (p *explainedPlans) onNotice(_ *pgconn.PgConn, n *pgconn.Notice) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans = append(p.plans, n.Message)
}

// last is the plan of the last statement run that began with prefix, as JSON and
// as its root node.
func (p *explainedPlans) last(t *testing.T, prefix string) (string, planNode) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.plans) - 1; i >= 0; i-- {
		msg := p.plans[i][strings.Index(p.plans[i], "{"):]
		var doc struct {
			QueryText string `json:"Query Text"`
			Plan      planNode
		}
		if err := json.Unmarshal([]byte(msg), &doc); err == nil && strings.HasPrefix(doc.QueryText, prefix) {
			return msg, doc.Plan
		}
	}
	t.Fatalf("no plan of %q was explained", prefix)
	return "", planNode{}
}

// explainingConn is a connection to dsn on which auto_explain sends the plan of
// every statement it runs, as run, to plans; closed when the test ends.
func explainingConn(t *testing.T, dsn string, plans *explainedPlans) *pgx.Conn {
	t.Helper()
	ctx := context.Background()
	cfg, err := pgx.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.OnNotice = plans.onNotice
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	for _, set := range []string{`LOAD 'auto_explain'`, `SET auto_explain.log_min_duration = 0`,
		`SET auto_explain.log_analyze = on`, `SET auto_explain.log_timing = off`, `SET auto_explain.log_format = json`,
		`SET auto_explain.log_level = notice`} {
		if _, err := conn.Exec(ctx, set); err != nil {
			t.Fatal(err)
		}
	}
	return conn
}

// newConn is a connection to a new test database, released when the test ends.
func newConn(t *testing.T) *pgxpool.Conn {
	t.Helper()
	conn, err := dbtest.New(t).Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Release)
	return conn
}

// rowsIn runs one statement in a transaction begun by begin on b and returns its
// rows.
func rowsIn[T any](t *testing.T, plan db.Plan,
	b db.TxBeginner, run func(q *db.Queries) ([]T, error)) []T {
	t.Helper()
	var rows []T
	if err := db.InTx(context.Background(), b, plan, func(q *db.Queries) error {
		var err error
		rows, err = run(q)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// explainRolledBack runs stmt under EXPLAIN (ANALYZE, BUFFERS, JSON) on conn, in a
// transaction begun as plan says and rolled back, and returns the plan as text
// and its root node.
func explainRolledBack(t *testing.T, plan db.Plan, conn *pgxpool.Conn, stmt string) (string, planNode) {
	t.Helper()
	ctx := context.Background()
	var text string
	if err := db.InTx(ctx, conn, plan, func(*db.Queries) error {
		if err := conn.QueryRow(ctx, `EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF, SUMMARY OFF, FORMAT JSON) `+stmt).Scan(&text); err != nil {
			return err
		}
		return errRollback
	}); !errors.Is(err, errRollback) {
		t.Fatal(err)
	}
	var doc []struct{ Plan planNode }
	if err := json.Unmarshal([]byte(text), &doc); err != nil || len(doc) != 1 {
		t.Fatalf("read the plan: %v", err)
	}
	return text, doc[0].Plan
}

// errRollback ends a transaction a test only looked into.
var errRollback = errors.New("rolled back on purpose")

// dueIndexRows is how many rows the plan's scans of actions_due_idx returned.
func dueIndexRows(t *testing.T, root planNode, plan string) int {
	t.Helper()
	n, found := 0, false
	var walk func(p planNode)
	walk = func(p planNode) {
		if p.IndexName == "actions_due_idx" {
			n, found = n+p.ActualRows*p.ActualLoops, true
		}
		for _, c := range p.Plans {
			walk(c)
		}
	}
	walk(root)
	if !found {
		t.Fatalf("the claim plan does not read actions_due_idx: %s", plan)
	}
	return n
}

// actionsRowsRead is how many rows the plan's scans of actions read, those its
// filters removed included.
func actionsRowsRead(p planNode) int {
	n := 0
	if p.RelationName == "actions" && strings.HasSuffix(p.NodeType, "Scan") {
		n = (p.ActualRows + p.RowsRemovedByFilter) * p.ActualLoops
	}
	for _, c := range p.Plans {
		n += actionsRowsRead(c)
	}
	return n
}

type planNode struct {
	NodeType     string `json:"Node Type"`
	RelationName string `json:"Relation Name"`
	IndexName    string `json:"Index Name"`
	ActualRows   int    `json:"Actual Rows"`
	ActualLoops  int    `json:"Actual Loops"`
	IndexCond    string `json:"Index Cond"`
	// RowsRemovedByFilter is per loop, as ActualRows is.
	RowsRemovedByFilter int `json:"Rows Removed by Filter"`
	// With BUFFERS: the blocks the node and its children read.
	SharedHitBlocks  int        `json:"Shared Hit Blocks"`
	SharedReadBlocks int        `json:"Shared Read Blocks"`
	Plans            []planNode `json:"Plans"`
}

// The router claims the head of event_queue, and deletes what it claimed, reading
// only those rows whatever the queue's statistics say. The queue is emptied as fast
// as it fills, so autovacuum may analyze it while it is empty but has pages;
// Postgres then takes it to hold one row whatever it holds later. Planned that way
// the claim scanned and sorted the whole queue (when an analyze had seen rows in it
// before), or deleted the claimed rows by a join that read the whole queue once per
// claimed row (when none had): a second at 40,000 waiting events, and routing fell
// 36 s behind a 10 s burst in a bench run.
func TestRouterClaimReadsTheQueueHeadAfterAnEmptyAnalyze(t *testing.T) {
	dbtest.SinglePostgresOnly(t, "it reads the router's single-Postgres plan and the statistics of the one-node tables")
	t.Parallel()
	for _, tc := range []struct {
		name    string
		analyze []string // what autovacuum saw of the queue
		premise string   // a statement of the old claim that these statistics make read the whole queue
	}{{
		name:    "analyzed with rows, then empty",
		analyze: []string{`ANALYZE event_queue`, `DELETE FROM event_queue`, `ANALYZE event_queue`},
		premise: `SELECT client, id FROM event_queue ORDER BY id LIMIT 50 FOR UPDATE SKIP LOCKED`,
	}, {
		name:    "analyzed only empty",
		analyze: []string{`DELETE FROM event_queue`, `ANALYZE event_queue`},
		premise: `WITH next AS (SELECT client, id FROM event_queue ORDER BY id LIMIT 50 FOR UPDATE SKIP LOCKED)
			DELETE FROM event_queue q USING next WHERE q.client = next.client AND q.id = next.id`,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			routerReadsTheQueueHead(t, tc.analyze, tc.premise)
		})
	}
}

func routerReadsTheQueueHead(t *testing.T, analyze []string, premise string) {
	ctx := context.Background()
	w := newWorld(t, worldOptions{noEngine: true})
	exec := func(stmt string, args ...any) {
		t.Helper()
		if _, err := w.pool.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// A burst's worth of queued events, routed, then what autovacuum saw.
	exec(`INSERT INTO event_queue (client, id) SELECT 'acme', i FROM generate_series(1000001, 1020000) AS i`)
	for _, stmt := range analyze {
		exec(stmt)
	}
	var pages, tuples float64
	if err := w.pool.QueryRow(ctx, `SELECT relpages, reltuples FROM pg_class WHERE relname = 'event_queue'`).Scan(&pages, &tuples); err != nil {
		t.Fatal(err)
	}
	if pages == 0 || tuples != 0 {
		t.Fatalf("event_queue analyzed with %v pages and %v rows; the test needs pages and no rows", pages, tuples)
	}
	// The next burst.
	exec(`INSERT INTO events (client, environment, source, source_event_id, type, body, body_sha256)
SELECT 'acme', 'live', 'stripe-live', 'evt_q_' || i, 'ping', '{}', '\x00' FROM generate_series(1, 20000) AS i`)

	// The premise: planned with these statistics, the old claim reads the whole queue.
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	premisePlan, premiseRoot := explainRolledBack(t, db.Plan{}, conn, premise)
	conn.Release()
	if read := queueRowsRead(premiseRoot); read < 20000 {
		t.Fatalf("with these statistics the old claim read %d rows of event_queue; the test's premise is the whole queue, 20000: %s",
			read, premisePlan)
	}

	// A pool whose every statement's plan comes back to it as a notice.
	cfg := w.pool.Config().Copy()
	var mu sync.Mutex
	var plans []string
	cfg.ConnConfig.OnNotice = func(_ *pgconn.PgConn, n *pgconn.Notice) {
		if i := strings.Index(n.Message, "{"); i >= 0 && strings.Contains(n.Message, "name: EventClaimReceived") {
			mu.Lock()
			plans = append(plans, n.Message[i:])
			mu.Unlock()
		}
	}
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		_, err := c.Exec(ctx, `LOAD 'auto_explain'; SET auto_explain.log_min_duration = 0;
			SET auto_explain.log_analyze = on; SET auto_explain.log_timing = off;
			SET auto_explain.log_format = json; SET auto_explain.log_level = notice`)
		return err
	}
	explained, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer explained.Close()
	eng := engine.New(engine.Params{Pool: explained, Config: w.cfg,
		Clients: destination.NewClients(w.cfg)})
	n, err := eng.RouteBatch(ctx, 50)
	if err != nil {
		t.Fatal(err)
	}
	if n != 50 {
		t.Errorf("routed %d events, want 50", n)
	}
	mu.Lock()
	got := plans
	mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d plans of the router's claim came back, want 1", len(got))
	}
	var plan struct{ Plan planNode }
	if err := json.Unmarshal([]byte(got[0]), &plan); err != nil {
		t.Fatalf("read the plan: %v: %s", err, got[0])
	}
	// Either of the queue's indexes gives the client's head in id order.
	if scan := queueScan(plan.Plan); scan.NodeType != "Index Scan" || scan.ActualRows != 50 {
		t.Errorf("the router's claim read event_queue by %s %s, %d rows; want an index scan of the queue, 50 rows",
			scan.NodeType, scan.IndexName, scan.ActualRows)
	}
	if read := queueRowsRead(plan.Plan); read > 100 {
		t.Errorf("the router's claim read %d rows of event_queue to claim and delete 50; want 100 at most: %s", read, got[0])
	}
	var first, last, routed, left int
	if err := w.pool.QueryRow(ctx, `SELECT min(substring(source_event_id from 7)::int), max(substring(source_event_id from 7)::int),
		count(*), (SELECT count(*) FROM event_queue) FROM events WHERE status <> 'received'`).Scan(&first, &last, &routed, &left); err != nil {
		t.Fatal(err)
	}
	if first != 1 || last != 50 || routed != 50 || left != 19950 {
		t.Errorf("routed %d events, evt_q_%d to evt_q_%d, with %d left in the queue; want the oldest 50, evt_q_1 to evt_q_50, and 19950 left",
			routed, first, last, left)
	}
}

// queueRowsRead is how many rows the plan's scans of event_queue returned in all.
func queueRowsRead(p planNode) int {
	n := 0
	if p.RelationName == "event_queue" && p.NodeType != "ModifyTable" {
		n += p.ActualRows * max(p.ActualLoops, 1)
	}
	for _, c := range p.Plans {
		n += queueRowsRead(c)
	}
	return n
}

// queueScan is the plan's scan of event_queue.
func queueScan(p planNode) planNode {
	if p.RelationName == "event_queue" {
		return p
	}
	for _, c := range p.Plans {
		if s := queueScan(c); s.NodeType != "" {
			return s
		}
	}
	return planNode{}
}

// The performer's record reuses one generic plan per connection, made with lookups
// by key only (db.KeyPlanned), and so does its start of the calls that wait
// for a predecessor's result (in the claim's transaction, after db.PlanByKey). Made
// while a new database's tables hold what autovacuum may have seen of them
// (nothing, or a hundred finished actions) and kept while a burst claims and
// records twenty thousand more, the plans still find each row they touch by its
// key: the recorded actions, their attempts, and the successors the record
// releases. Written with its state test as a plain "state = 'processing'", the
// record's plan reads every entry the claims left in the indexes of processing
// actions (each dead once its action is recorded).
func TestPerformerRecordPlanLooksUpEachActionByKey(t *testing.T) {
	dbtest.SinglePostgresOnly(t, "it reads the record's single-Postgres plan (on Citus each shard plans its statement)")
	t.Parallel()
	for _, tc := range []struct {
		name   string
		before []string // what autovacuum saw when the plans were made
	}{{
		name: "a hundred finished actions analyzed",
		before: []string{`INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, max_attempts, give_up_at)
SELECT 'c', 'live', 's', 'n', 'enq_done_' || i, '[]', 'op_done_' || i, 'd0', '{}', '\x00', 'confirmed', 3,
       now() + interval '1 hour'
FROM generate_series(1, 100) AS i`, `ANALYZE actions`, `ANALYZE attempts`},
	}, {
		name: "empty tables, never analyzed",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			recordLooksUpByKey(t, tc.before)
		})
	}
}

func recordLooksUpByKey(t *testing.T, before []string) {
	ctx := context.Background()
	conn := newConn(t)
	exec := func(stmt string, args ...any) {
		t.Helper()
		if _, err := conn.Exec(ctx, stmt, args...); err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	// No analyze but the test's own: the plans stay the ones made first.
	exec(`ALTER TABLE actions SET (autovacuum_enabled = off)`)
	exec(`DO $$ DECLARE p regclass; BEGIN
		FOR p IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'attempts'::regclass LOOP
			EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = off)', p);
		END LOOP; END $$`)
	for _, stmt := range before {
		exec(stmt)
	}
	record := func(ids, attemptIDs []int64) []db.ActionRecordBatchRow {
		t.Helper()
		p := db.ActionRecordBatchParams{Worker: "w1", Ids: ids, AttemptIds: attemptIDs}
		for _, id := range ids {
			p.Clients, p.Observed = append(p.Clients, "c"), append(p.Observed, "success")
			p.HttpStatuses, p.Errors = append(p.HttpStatuses, 201), append(p.Errors, "")
			p.States, p.Reasons = append(p.States, ledger.StateConfirmed), append(p.Reasons, "")
			p.NextAttemptAts, p.ExternalRefs = append(p.NextAttemptAts, time.Now()), append(p.ExternalRefs, fmt.Sprintf("ref_%d", id))
			p.Results, p.Owners, p.LeaseTokens = append(p.Results, `{"id":1}`), append(p.Owners, ""), append(p.LeaseTokens, 1)
			p.AttemptsBack, p.RowsDays = append(p.AttemptsBack, 0), append(p.RowsDays, partitions.Day(time.Now()))
		}
		return rowsIn(t, db.KeyPlanned, conn, func(q *db.Queries) ([]db.ActionRecordBatchRow, error) {
			return q.ActionRecordBatch(ctx, p)
		})
	}
	// The plans are made now, as the performer's first record and start of calls
	// would make them.
	if got := record([]int64{-1}, []int64{-1}); len(got) != 0 {
		t.Fatalf("recorded %d actions, none claimed", len(got))
	}
	if err := db.InTx(ctx, conn, db.IndexPlanned, func(q *db.Queries) error {
		if err := db.PlanByKey(ctx, q); err != nil {
			return err
		}
		_, err := q.ActionStartCalls(ctx, db.ActionStartCallsParams{Worker: "w1", Clients: []string{"c"}, Ids: []int64{-1}})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	prepared := func(sqlcName string) (name, statement string) {
		t.Helper()
		if err := conn.QueryRow(ctx, `SELECT name, statement FROM pg_prepared_statements
			WHERE statement LIKE '%name: ' || $1::text || ' :many%'`, sqlcName).Scan(&name, &statement); err != nil {
			t.Fatalf("%s is not a prepared statement of the connection: %v", sqlcName, err)
		}
		return name, statement
	}
	recordName, statement := prepared("ActionRecordBatch")
	startName, _ := prepared("ActionStartCalls")
	const stateTest = `(a.state = 'processing') IS TRUE`
	if strings.Count(statement, stateTest) != 1 {
		t.Fatalf("the record statement has no %s", stateTest)
	}
	// The premise: the plain state test, its plan made at the same moment.
	exec(`PREPARE plain_record AS ` + strings.Replace(statement, stateTest, `a.state = 'processing'`, 1))
	if err := db.InTx(ctx, conn, db.KeyPlanned, func(*db.Queries) error {
		_, err := conn.Exec(ctx, `EXECUTE plain_record`+recordArgs([]int64{-1}, []int64{-1}))
		return err
	}); err != nil {
		t.Fatal(err)
	}

	// A burst: twenty thousand actions claimed, their calls started, each with a
	// successor waiting for it; all but sixteen of them recorded, their successors
	// released.
	exec(`INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, lease_owner, lease_token, max_attempts, give_up_at)
SELECT 'c', 'live', 's', 'n', 'enq_' || i, '[]', 'op_' || i, 'd0', '{}', '\x00', 'processing', 'w1', 1, 3,
       now() + interval '1 hour'
FROM generate_series(1, 20000) AS i`)
	exec(`INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
SELECT client, id, 'call', operation_key, 'w1', rows_day FROM actions WHERE state = 'processing'`)
	exec(`INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, after_id, reason, max_attempts, give_up_at, next_attempt_at)
SELECT client, 'live', 's', 'then', business_key, '[]', 'then_' || operation_key, 'd0', '{}', '\x00', id,
       'waiting for n', 3, now() + interval '1 hour', '9999-12-31 00:00:00+00'
FROM actions WHERE state = 'processing'`)
	exec(`UPDATE actions SET state = 'confirmed', lease_owner = NULL
WHERE state = 'processing' AND operation_key NOT IN (SELECT 'op_' || i FROM generate_series(1, 16) AS i)`)
	exec(`UPDATE attempts t SET status = 'finished', observed = 'success', finished_at = now()
FROM actions a WHERE a.client = t.client AND a.id = t.action_id AND a.state = 'confirmed'`)
	exec(`UPDATE actions s SET next_attempt_at = now(), reason = ''
FROM actions p WHERE p.client = s.client AND p.id = s.after_id AND p.state = 'confirmed'`)
	var open, attempts []int64
	rows, err := conn.Query(ctx, `SELECT a.id, t.id FROM actions a JOIN attempts t ON t.client = a.client AND t.action_id = a.id
		WHERE a.state = 'processing' ORDER BY a.id`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id, attempt int64
		if err := rows.Scan(&id, &attempt); err != nil {
			t.Fatal(err)
		}
		open, attempts = append(open, id), append(attempts, attempt)
	}
	if rows.Err() != nil || len(open) != 16 {
		t.Fatalf("%d actions left processing with their attempts (%v), want 16", len(open), rows.Err())
	}

	// What a kept plan reads of the indexes (rolled back).
	// keyed (set for the kept plans) reports scans that read an index without a
	// condition.
	var root planNode // the last plan explained
	explain := func(execute string, keyed bool) (entries, blocks int, plan string) {
		t.Helper()
		plan, root = explainRolledBack(t, db.KeyPlanned, conn, `EXECUTE `+execute)
		for _, scan := range wholeIndexScans(root) {
			if keyed {
				t.Errorf("a kept plan reads an index without a condition, %s: %s", scan, plan)
			}
		}
		entries, blocks = ledgerIndexReads(root)
		return entries, blocks, plan
	}
	// A lookup by the whole key reads a block at each level of the index, two or
	// three here; one by its first column reads all the client's entries.
	startArgs := fmt.Sprintf(`('w1', false, '', '{%s}', '{%s}')`, strings.TrimSuffix(strings.Repeat("c,", len(open)), ","),
		strings.Trim(strings.Join(strings.Fields(fmt.Sprint(open)), ","), "[]"))
	read, blocks, plan := explain(pgx.Identifier{startName}.Sanitize()+startArgs, true)
	if read != 16 || blocks > 16*3 {
		t.Errorf("the kept plan that starts calls read %d index entries of actions in %d blocks for 16 actions; "+
			"want 16 entries in 3 blocks each at most: %s", read, blocks, plan)
	}
	// The record's lookups: the actions (each now with a second entry, left dead by
	// the rolled-back start of calls), their attempts, their successors in
	// actions_after_idx and by id.
	const lookups = 16 * 4
	read, blocks, plan = explain(pgx.Identifier{recordName}.Sanitize()+recordArgs(open, attempts), true)
	if read != lookups+16 || blocks > lookups*3 {
		t.Errorf("the kept record plan read %d index entries in %d blocks to record 16 actions, their attempts and successors; "+
			"want %d entries in 3 blocks a lookup at most: %s", read, blocks, lookups+16, plan)
	}
	if parts := indexesRead(root, "attempts_"); len(parts) != 1 {
		t.Errorf("the kept record plan read the attempts of %d partitions (%v), want the one of the actions' day: %s",
			len(parts), parts, plan)
	}
	for _, bad := range []string{`"Node Type": "Seq Scan"`, `"Node Type": "Index Scan"`, `"Node Type": "Sort"`} {
		if strings.Contains(plan, bad) {
			t.Errorf("the kept record plan has a %s: %s", bad, plan)
		}
	}
	if read, _, plan := explain(`plain_record`+recordArgs(open, attempts), false); read < 20000 {
		t.Fatalf("the plain state test's plan read %d index entries; the test's premise is every claim, 20000: %s", read, plan)
	}

	got := record(open, attempts)
	if len(got) != 16 || got[0].Released != 16 {
		t.Fatalf("recorded %d of the 16 processing actions (%v); want 16, releasing 16 successors", len(got), got)
	}
	var confirmed, finished, released int
	if err := conn.QueryRow(ctx, `SELECT count(*),
		(SELECT count(*) FROM attempts WHERE id = ANY($2) AND status = 'finished'
		 AND observed = 'success' AND http_status = 201 AND evidence = 'ref_' || action_id),
		(SELECT count(*) FROM actions WHERE after_id = ANY($1) AND state = 'pending' AND next_attempt_at <= now() AND reason = '')
		FROM actions WHERE id = ANY($1) AND state = 'confirmed'
		AND external_ref = 'ref_' || id AND result = '{"id":1}' AND lease_owner IS NULL`, open, attempts).Scan(&confirmed, &finished, &released); err != nil {
		t.Fatal(err)
	}
	if confirmed != 16 || finished != 16 || released != 16 {
		t.Errorf("of the 16 recorded actions %d are confirmed with their reference and result, %d of their attempts finished "+
			"and %d of their successors due; want 16 of each", confirmed, finished, released)
	}
}

// wholeIndexScans describes the plan's scans of an index of actions or attempts
// with no condition: each reads the whole index, or the whole of a partial one.
func wholeIndexScans(p planNode) []string {
	var found []string
	if (strings.HasPrefix(p.IndexName, "actions_") || strings.HasPrefix(p.IndexName, "attempts_")) && p.IndexCond == "" {
		found = append(found, p.NodeType+" of "+p.IndexName)
	}
	for _, c := range p.Plans {
		found = append(found, wholeIndexScans(c)...)
	}
	return found
}

// recordArgs is the argument list of an EXECUTE of ActionRecordBatch confirming
// ids, with their attempts, as the test's record does.
func recordArgs(ids, attemptIDs []int64) string {
	each := func(v string) string { return `'{` + strings.TrimSuffix(strings.Repeat(v+",", len(ids)), ",") + `}'` }
	list := func(ns []int64) string {
		return `'{` + strings.Trim(strings.Join(strings.Fields(fmt.Sprint(ns)), ","), "[]") + `}'`
	}
	refs := make([]string, len(ids))
	for i, id := range ids {
		refs[i] = fmt.Sprintf("ref_%d", id)
	}
	return fmt.Sprintf(`(%s, %s, %s, %s, %s, %s, %s, %s, array_fill(now(), ARRAY[%d]), '{%s}', %s, %s, %s, %s, `+
		`array_fill((now() AT TIME ZONE 'UTC')::date, ARRAY[%d]), false, '', 'w1')`,
		each("c"), list(ids), list(attemptIDs), each("success"), each("201"), each(`""`), each("confirmed"), each(`""`),
		len(ids), strings.Join(refs, ","), each(`"{\"id\":1}"`), each(`""`), each("1"), each("0"), len(ids))
}

// indexesRead lists the indexes named with prefix that the plan's scans ran
// (a partition's own index is named after the partition).
func indexesRead(p planNode, prefix string) []string {
	var found []string
	if strings.HasPrefix(p.IndexName, prefix) && p.ActualLoops > 0 {
		found = append(found, p.IndexName)
	}
	for _, c := range p.Plans {
		for _, name := range indexesRead(c, prefix) {
			if !slices.Contains(found, name) {
				found = append(found, name)
			}
		}
	}
	return found
}

// ledgerIndexReads is how many entries the plan's scans of the indexes of actions
// and attempts returned in all (a bitmap index scan returns every entry it matched,
// live or dead), and how many blocks of those indexes they read.
func ledgerIndexReads(p planNode) (entries, blocks int) {
	if strings.HasPrefix(p.IndexName, "actions_") || strings.HasPrefix(p.IndexName, "attempts_") {
		entries += p.ActualRows * max(p.ActualLoops, 1)
		blocks += p.SharedHitBlocks + p.SharedReadBlocks
	}
	for _, c := range p.Plans {
		e, b := ledgerIndexReads(c)
		entries, blocks = entries+e, blocks+b
	}
	return entries, blocks
}
