package store_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/store"
)

// The performer's writes over batches and over every client, each run by both
// forms on the same world of two clients' actions (see world), compared by the
// rows they leave.

// worldAction is one action of the world, as a row to insert.
type worldAction struct {
	client, name, dest, state string
	leaseOwner, claimedFrom   string
	attemptKey                string
	next                      string // next_attempt_at: a time, or "now"
	after                     string // the name of its predecessor, of the same client
	parked                    bool   // parked by an open breaker since parkedAt
	started                   string // the kind of the attempt it has started: "call", "lookup" or ""
}

// The world's fixed times: the tests compare rows written in two transactions,
// so the times they compare are not the transactions' own.
var (
	parkedAt   = time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	releasedAt = parkedAt.Add(90 * time.Minute)
	giveUpAt   = time.Date(2026, 12, 31, 0, 0, 0, 0, time.UTC)
	dueAt      = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
)

var worldActions = []worldAction{
	{client: "acme", name: "a1", dest: "crm", state: ledger.StateProcessing, leaseOwner: "w1", claimedFrom: ledger.StatePending, started: "call"},
	{client: "acme", name: "a2", dest: "crm", state: ledger.StateProcessing, leaseOwner: "w1", claimedFrom: ledger.StateUncertain, started: "lookup"},
	{client: "acme", name: "a3", dest: "crm", state: ledger.StateProcessing, leaseOwner: "w2", claimedFrom: ledger.StatePending},
	{client: "acme", name: "a4", dest: "crm", state: ledger.StatePending, after: "a1", next: "9999-12-31 00:00:00+00"},
	{client: "acme", name: "a5", dest: "crm", state: ledger.StatePending, parked: true},
	{client: "acme", name: "a6", dest: "crm", state: ledger.StatePending, attemptKey: "oh_a6_2"},
	{client: "acme", name: "a7", dest: "crm", state: ledger.StateProcessing, leaseOwner: "w1", claimedFrom: ledger.StatePending, attemptKey: "oh_a7_2"},
	{client: "acme", name: "a8", dest: "crm", state: ledger.StateProcessing, leaseOwner: "w1", claimedFrom: ledger.StateRetrying},
	{client: "beta", name: "b1", dest: "crm", state: ledger.StateProcessing, leaseOwner: "w1", claimedFrom: ledger.StateRetrying, started: "call"},
	{client: "beta", name: "b2", dest: "down", state: ledger.StateHeld},
	{client: "beta", name: "b3", dest: "crm", state: ledger.StateHeld},
	{client: "beta", name: "b4", dest: "crm", state: ledger.StatePending, parked: true},
	{client: "beta", name: "b5", dest: "crm", state: ledger.StateRetrying},
	{client: "beta", name: "b6", dest: "mail", state: ledger.StatePending, parked: true},
	{client: "beta", name: "b7", dest: "crm", state: ledger.StateProcessing, leaseOwner: "w1", claimedFrom: ledger.StatePending},
}

// worldIDs are the ids of the world's actions and of their started attempts, by
// the action's name.
type worldIDs struct{ action, attempt map[string]int64 }

// world writes the world's actions in tx, with the disconnected destination
// "down", and returns their ids.
func world(t *testing.T, tx pgx.Tx) worldIDs {
	t.Helper()
	ctx := context.Background()
	exec(t, tx, `INSERT INTO destinations (name, status, reason, changed_at) VALUES ('down', 'disconnected', 'refused', now())
		ON CONFLICT DO NOTHING`)
	ids := worldIDs{action: map[string]int64{}, attempt: map[string]int64{}}
	for _, a := range worldActions {
		var after *int64
		if a.after != "" {
			id := ids.action[a.after]
			after = &id
		}
		var parked *time.Time
		if a.parked {
			parked = &parkedAt
		}
		var lease *time.Time
		if a.leaseOwner != "" {
			at := giveUpAt
			lease = &at
		}
		var next any = dueAt
		if a.next != "" {
			next = a.next
		}
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO actions (client, environment, source, name, business_key, key_parts,
			operation_key, destination, params, params_sha256, state, owner, max_attempts, give_up_at, next_attempt_at,
			after_id, lease_owner, lease_expires_at, lease_token, claimed_from, attempt_key, parked_at, attempts)
			VALUES ($1, 'live', 'stripe-live', $2, $2, '["k"]', 'oh_' || $1 || '_' || $2, $3, '{}', '\x00', $4,
			        'ops@example.com', 5, $5, $6::timestamptz, $7, nullif($8, ''), $9, 1, $10, $11, $12, 1)
			RETURNING id`,
			a.client, a.name, a.dest, a.state, giveUpAt, next, after, a.leaseOwner, lease, a.claimedFrom, a.attemptKey, parked).Scan(&id)
		if err != nil {
			t.Fatalf("insert %s: %v", a.name, err)
		}
		ids.action[a.name] = id
		if a.started != "" {
			var attempt int64
			if err := tx.QueryRow(ctx, `INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
				SELECT $1, $2, $3, 'oh_' || $1 || '_' || $4, $5, rows_day FROM actions WHERE client = $1 AND id = $2
				RETURNING id`,
				a.client, id, a.started, a.name, a.leaseOwner).Scan(&attempt); err != nil {
				t.Fatalf("insert %s's attempt: %v", a.name, err)
			}
			ids.attempt[a.name] = attempt
		}
	}
	return ids
}

// worldRow is an action of the world and its attempts, as the rules read them.
type worldRow struct {
	Client, Name, State, Reason, LeaseOwner, Next, GiveUp string
	Attempts                                              int32
	Parked                                                bool
	Trail                                                 []string // each attempt: kind, status, observed, key, worker
}

// worldRows reads the world back, the transaction's own time written "now".
func worldRows(t *testing.T, tx pgx.Tx) []worldRow {
	t.Helper()
	rows, err := tx.Query(context.Background(), `SELECT a.client, a.name, a.state, a.reason, coalesce(a.lease_owner, ''),
		CASE WHEN a.next_attempt_at = now() THEN 'now' ELSE a.next_attempt_at::text END, a.give_up_at::text,
		a.attempts, a.parked_at IS NOT NULL,
		ARRAY(SELECT concat_ws(' ', t.kind, t.status, t.observed, t.operation_key, t.worker) FROM attempts t
		      WHERE t.client = a.client AND t.action_id = a.id ORDER BY t.id)
		FROM actions a ORDER BY a.client, a.name`)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (w worldRow, err error) {
		err = r.Scan(&w.Client, &w.Name, &w.State, &w.Reason, &w.LeaseOwner, &w.Next, &w.GiveUp, &w.Attempts, &w.Parked, &w.Trail)
		return w, err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// rowsDay is the day the world's actions and their attempts are written in.
var rowsDay = partitions.Day(time.Now())

// finished counts the attempts of the action that are no longer started, read
// as the action's page reads them.
func finished(t *testing.T, q *db.Queries, client string, id int64) int {
	t.Helper()
	attempts, err := q.AttemptList(context.Background(), db.AttemptListParams{Client: client, ActionID: id})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, a := range attempts {
		if a.Status != "started" {
			n++
		}
	}
	return n
}

// bothClients is the world's clients, as the lanes list them.
func bothClients(context.Context) ([]string, error) { return []string{"acme", "beta"}, nil }

// inWorld runs op by both forms on the world and compares what it returns and
// the rows it leaves.
func inWorld[T any](t *testing.T, op func(t *testing.T, s store.Store, q *db.Queries, ids worldIDs) T) {
	t.Helper()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	var ids worldIDs
	type result struct {
		Answer T
		Rows   []worldRow
	}
	agree(t, pool, func(t *testing.T, tx pgx.Tx) { ids = world(t, tx) }, func(t *testing.T, s store.Store, tx pgx.Tx, q *db.Queries) result {
		return result{op(t, s, q, ids), worldRows(t, tx)}
	})
}

func TestStartCallsFormsAgree(t *testing.T) {
	t.Parallel()
	inWorld(t, func(t *testing.T, s store.Store, q *db.Queries, ids worldIDs) []int32 {
		// a3 is w2's, a6 is not claimed: neither starts.
		started, err := s.StartCalls(context.Background(), q, db.ActionStartCallsParams{Worker: "w1", Client: "acme",
			Clients: []string{"acme", "acme", "acme", "acme"}, Ids: []int64{ids.action["a8"], ids.action["a3"], ids.action["a6"], ids.action["a7"]}})
		if err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		var attempts []int32
		for _, r := range started {
			attempts = append(attempts, r.Attempts)
		}
		if len(attempts) != 2 {
			t.Errorf("%T started %d calls, want a7's and a8's", s, len(attempts))
		}
		return attempts
	})
}

func TestRecordOutcomesFormsAgree(t *testing.T) {
	t.Parallel()
	inWorld(t, func(t *testing.T, s store.Store, q *db.Queries, ids worldIDs) []string {
		// a1 confirmed releases its successor a4; a2's lease token is not the
		// claim's; b1 is retried and gives its attempt back.
		later := dueAt.Add(time.Hour)
		p := db.ActionRecordBatchParams{Worker: "w1",
			Clients: []string{"acme", "beta", "acme"}, Ids: []int64{ids.action["a1"], ids.action["b1"], ids.action["a2"]},
			AttemptIds: []int64{ids.attempt["a1"], ids.attempt["b1"], 0}, Observed: []string{"success", "timeout", "success"},
			HttpStatuses: []int32{201, 0, 200}, Errors: []string{"", "no answer", ""},
			States:         []string{ledger.StateConfirmed, ledger.StateRetrying, ledger.StateConfirmed},
			Reasons:        []string{"", "no answer within 10s", ""},
			NextAttemptAts: []time.Time{later, later, later}, ExternalRefs: []string{"crm_1", "", ""},
			Results: []string{`{"id":"crm_1"}`, "", ""}, Owners: []string{"", "", ""},
			LeaseTokens: []int64{1, 1, 2}, AttemptsBack: []int32{0, 1, 0},
			RowsDays: []time.Time{rowsDay, rowsDay, rowsDay}}
		recorded, err := s.RecordOutcomes(context.Background(), q, p)
		if err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		if n := finished(t, q, "acme", ids.action["a1"]) + finished(t, q, "beta", ids.action["b1"]); n != 2 {
			t.Errorf("%T finished %d of a1's and b1's attempts, want both", s, n)
		}
		var out []string
		released := false
		for _, r := range recorded {
			out = append(out, r.Client)
			released = released || r.Released > 0
		}
		slices.Sort(out)
		if !released {
			t.Errorf("%T: a1's successor was not released", s)
		}
		return out
	})
}

func TestRecoverLeasesFormsAgree(t *testing.T) {
	t.Parallel()
	inWorld(t, func(t *testing.T, s store.Store, q *db.Queries, ids worldIDs) []string {
		recovered, err := s.RecoverLeases(context.Background(), q, db.ActionRecoverLeasesParams{
			Clients: []string{"beta", "acme", "acme"}, Ids: []int64{ids.action["b1"], ids.action["a2"], ids.action["a5"]},
			States:         []string{ledger.StateUncertain, ledger.StateUncertain, ledger.StateRetrying},
			Reasons:        []string{"lease expired during the call", "lease expired during the lookup", "not processing"},
			NextAttemptAts: []time.Time{dueAt, dueAt, dueAt}, RowsDays: []time.Time{rowsDay, rowsDay, rowsDay}})
		if err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		var out []string
		for _, r := range recovered {
			out = append(out, r.Client+" "+r.State)
		}
		slices.Sort(out) // the statement returns its rows in no order
		return out
	})
}

// TestWritesOverEveryClientFormsAgree: the statements that write every
// client's actions of a kind (one statement on one Postgres, one a client on
// Citus) leave the same rows, each writing what it says and nothing else.
func TestWritesOverEveryClientFormsAgree(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	writes := map[string]func(s store.Store, q *db.Queries) ([]int64, error){
		"ReleaseStrayHeld": func(s store.Store, q *db.Queries) ([]int64, error) {
			return s.ReleaseStrayHeld(ctx, q, bothClients)
		},
		"ReleaseLeases": func(s store.Store, q *db.Queries) ([]int64, error) {
			return s.ReleaseLeases(ctx, q, "w1", bothClients)
		},
		"HoldDestination": func(s store.Store, q *db.Queries) ([]int64, error) {
			return s.HoldDestination(ctx, q, db.ActionHoldDestinationParams{Destination: "crm",
				Reason: "destination crm is disconnected", States: ledger.HoldableStates}, bothClients)
		},
	}
	for name, write := range writes {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			inWorld(t, func(t *testing.T, s store.Store, q *db.Queries, _ worldIDs) int {
				ids, err := write(s, q)
				if err != nil {
					t.Fatalf("%T: %v", s, err)
				}
				if len(ids) == 0 {
					t.Errorf("%T wrote nothing", s)
				}
				return len(ids)
			})
		})
	}
}

func TestReleaseParkedFormsAgree(t *testing.T) {
	t.Parallel()
	inWorld(t, func(t *testing.T, s store.Store, q *db.Queries, _ worldIDs) int64 {
		n, err := s.ReleaseParked(context.Background(), q, "crm", releasedAt, bothClients)
		if err != nil {
			t.Fatalf("%T: %v", s, err)
		}
		if n != 2 {
			t.Errorf("%T released %d parked actions of crm, want a5 and b4", s, n)
		}
		return n
	})
}
