package oncehook_test

import (
	"context"
	"testing"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
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
