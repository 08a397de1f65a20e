package oncehook_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/destination"
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
		if got, err = planned.ActionCountByState(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if n := prepared(); n != 0 {
		t.Errorf("after calls planned per call: %d prepared statements, want 0", n)
	}
	want, err := db.New(conn).ActionCountByState(ctx)
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

// The router's statements are planned per call. On a new database the router's first
// claims run against empty tables; prepared, the claim's generic plan (a sequential
// scan of the inbox) would be kept while a burst fills it, until autovacuum analyzes
// the tables, about a minute later: 130 ms per claim of 50 with 30,000 events
// against 0.5 ms planned per call, so a burst drained at 400 events a second.
func TestRouterKeepsNoPreparedPlan(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, worldOptions{noEngine: true})
	eng := oncehook.NewEngine(oncehook.EngineParams{Pool: w.pool, Config: w.cfg,
		Destinations: destination.NewClients(w.cfg)})
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

// The performer's claim is planned per call too. Its generic plan, made while a new
// database's actions table was empty, scans and sorts the whole table once a burst
// has filled it: after a 10 s burst on a new database, the bench's last call was made
// 70 s after the burst (440 actions a second) instead of 10 s.
func TestPerformerKeepsNoPreparedClaim(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, worldOptions{})
	for i := range 8 {
		w.deliver(checkout{eventID: fmt.Sprintf("evt_claim_%d", i), enquiry: fmt.Sprintf("enq-claim-%d", i), amount: 100})
	}
	for i := range 8 {
		w.waitFor("open_opportunity", fmt.Sprintf("enq-claim-%d", i), "confirmed")
	}
	w.stop()
	conns := w.pool.AcquireAllIdle(ctx)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	for _, c := range conns {
		rows, err := c.Query(ctx, `SELECT substring(statement from 'name: (\w+)') FROM pg_prepared_statements
			WHERE statement ~ 'name: (ActionClaim|ActionStartCalls)\M'`)
		if err != nil {
			t.Fatal(err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatal(err)
		}
		if len(names) > 0 {
			t.Errorf("the performer's statements %v are prepared on a connection; want them planned per call", names)
		}
	}
}
