package ledger_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
)

// The workers' claims name one client: the router's claim of received events,
// the performer's claim of due actions and the recovery's lock of lapsed leases
// each scan only the client's rows, and on a Citus cluster (make
// test-citus) each runs as one task on one shard (Citus runs a statement's
// modifying parts as subplans: each of them one task).
func TestWorkerClaimsReadOneClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, worldOptions{noEngine: true})
	w.deliver(checkout{eventID: "evt_explain", enquiry: "enq_explain", amount: 100})
	sharded := dbtest.OnCitus() // the claims name the client to Citus (see ActionClaim)
	conn, err := w.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	// Each statement prepared on the connection once (rolled back), then explained
	// with literal arguments.
	if err := pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		q := db.New(tx)
		if _, err := q.EventClaimReceived(ctx, db.EventClaimReceivedParams{Client: "acme", MaxEvents: 50, Sharded: sharded}); err != nil {
			return err
		}
		if _, err := q.ActionClaim(ctx, db.ActionClaimParams{Client: "acme", Callable: []string{"crm"}, FillNames: []string{},
			OnlyDestinations: []string{}, SkipDestinations: []string{}, MaxActions: 16, Worker: "w1", LeaseSeconds: 30,
			Sharded: sharded}); err != nil {
			return err
		}
		if _, err := q.ActionLockExpiredLeases(ctx, "acme"); err != nil {
			return err
		}
		if _, err := q.ActionStartCalls(ctx, db.ActionStartCallsParams{Worker: "w1", Sharded: sharded, Client: "acme",
			Clients: []string{"acme"}, Ids: []int64{1}}); err != nil {
			return err
		}
		if err := q.EventSetStatuses(ctx, db.EventSetStatusesParams{Sharded: sharded, Client: "acme",
			Clients: []string{"acme"}, Ids: []int64{1}, Statuses: []string{"routed"}, Reasons: []string{""}}); err != nil {
			return err
		}
		worker := "w1"
		if _, err := q.ActionRenewLease(ctx, db.ActionRenewLeaseParams{LeaseSeconds: 30, Client: "acme", ID: 1,
			Worker: &worker, LeaseToken: 1}); err != nil {
			return err
		}
		if _, err := q.ActionRecordBatch(ctx, db.ActionRecordBatchParams{Clients: []string{"acme"}, Ids: []int64{1},
			AttemptIds: []int64{0}, Observed: []string{"success"}, HttpStatuses: []int32{201}, Errors: []string{""},
			States: []string{"confirmed"}, Reasons: []string{""}, NextAttemptAts: []time.Time{time.Now()},
			ExternalRefs: []string{"ref"}, Results: []string{""}, Owners: []string{""}, LeaseTokens: []int64{1},
			Sharded: sharded, Client: "acme", Worker: "w1"}); err != nil {
			return err
		}
		return errRollback
	}); err != errRollback {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, args string
		claim      bool // reads the client's rows by client on a single Postgres too
	}{
		{"EventClaimReceived :many", fmt.Sprintf(`(%t, 'acme', 50)`, sharded), true},
		{"EventSetStatuses :exec", fmt.Sprintf(`(%t, 'acme', '{acme}', '{1}', '{routed}', '{""}')`, sharded), false},
		{"ActionClaim :many", fmt.Sprintf(`('{crm}', '{}', 'acme', '{}', '{}', 16, 'w1', 30, %t)`, sharded), true},
		{"ActionStartCalls :many", fmt.Sprintf(`('w1', %t, 'acme', '{acme}', '{1}')`, sharded), false},
		{"ActionRenewLease :execrows", `(30, 'acme', 1, 'w1', 1)`, true},
		{"ActionRecordBatch :many", fmt.Sprintf(`('{acme}', '{1}', '{0}', '{success}', '{201}', '{""}', '{confirmed}', '{""}',
			array_fill(now(), ARRAY[1]), '{ref}', '{""}', '{""}', '{1}', %t, 'acme', 'w1')`, sharded), false},
		{"ActionLockExpiredLeases :many", `('acme')`, true},
	} {
		var stmt string
		if err := conn.QueryRow(ctx, `SELECT name FROM pg_prepared_statements WHERE statement LIKE '%name: ' || $1::text || '%'`,
			tc.name).Scan(&stmt); err != nil {
			t.Fatalf("%s is not prepared on the connection: %v", tc.name, err)
		}
		plan := explainText(t, conn, `EXECUTE `+pgx.Identifier{stmt}.Sanitize()+tc.args)
		if tc.claim && !regexp.MustCompile(`(Index Cond|Filter): \(+client = 'acme'`).MatchString(plan) {
			t.Errorf("%s does not name the client in its scan of the client's rows:\n%s", tc.name, plan)
		}
		if !dbtest.OnCitus() {
			continue
		}
		counts := regexp.MustCompile(`Task Count: (\d+)`).FindAllStringSubmatch(plan, -1)
		if len(counts) == 0 {
			t.Errorf("%s: no Citus task in the plan:\n%s", tc.name, plan)
		}
		for _, c := range counts {
			if c[1] != "1" {
				t.Errorf("%s runs a part as %s tasks, want 1:\n%s", tc.name, c[1], plan)
			}
		}
	}
}

// explainText is EXPLAIN's plan of stmt as text, in a transaction rolled back.
func explainText(t *testing.T, conn interface {
	Begin(context.Context) (pgx.Tx, error)
}, stmt string) string {
	t.Helper()
	ctx := context.Background()
	tx, err := conn.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // only looked into
	rows, err := tx.Query(ctx, `EXPLAIN (COSTS OFF) `+stmt)
	if err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatalf("%s: %v", stmt, err)
	}
	return strings.Join(lines, "\n")
}
