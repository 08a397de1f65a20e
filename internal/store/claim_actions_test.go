package store_test

import (
	"cmp"
	"context"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/store"
)

// claimed is what a claim did to one action and the attempt it started, with the
// times and generated ids read as what the rule says of them.
type claimed struct {
	Client, Name, State, ClaimedFrom, LeaseOwner string
	Attempts                                     int32
	Started, FirstAttemptSet                     bool   // the claim started a call: an attempt row, a first attempt time
	AttemptStatus, AttemptKind, AttemptWorker    string // of the started attempt, if any
	AttemptKey                                   string // the key the started attempt went out under
}

// ClaimActions has two forms, one statement on a single Postgres (ActionClaim
// writes the attempts it starts itself) and two on Citus (ActionClaimSharded, then
// the attempts one insert each). Both run here, each in a transaction rolled back,
// on the same actions: every state, due or not, a disconnected destination, one
// this worker does not call, a successor whose params wait for a result, another
// client, a destination claimed on its own, an action with an attempt key. They
// must claim and start the same, under the same key, so that a change to one form
// alone fails this test.
func TestClaimActionsFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `INSERT INTO destinations (name, status, reason, changed_at)
		VALUES ('down', 'disconnected', 'refused', now())`); err != nil {
		t.Fatal(err)
	}
	for _, a := range []struct {
		client, name, dest, state, due string
		after                          bool
		attemptKey                     string
	}{
		{"acme", "welcome", "crm", ledger.StatePending, "now()", false, ""},
		{"acme", "welcome", "crm", ledger.StateRetrying, "now() - interval '1 minute'", false, ""},
		{"acme", "welcome", "crm", ledger.StateUncertain, "now()", false, ""},
		{"acme", "welcome", "crm", ledger.StatePending, "now() + interval '1 hour'", false, ""},
		{"acme", "welcome", "crm", ledger.StateFailed, "now()", false, ""},
		{"acme", "welcome", "crm", ledger.StateHeld, "now()", false, ""},
		{"acme", "welcome", "down", ledger.StatePending, "now()", false, ""},
		{"acme", "welcome", "mail", ledger.StatePending, "now()", false, ""},
		{"acme", "with_result", "crm", ledger.StatePending, "now()", true, ""},
		{"acme", "welcome", "slow", ledger.StatePending, "now()", false, ""},
		{"beta", "welcome", "crm", ledger.StatePending, "now()", false, ""},
		{"acme", "corrected", "crm", ledger.StateRetrying, "now()", false, "oh_corrected_2"},
	} {
		after := "NULL"
		if a.after {
			after = "(SELECT min(id) FROM actions)"
		}
		if _, err := pool.Exec(ctx, `INSERT INTO actions (client, environment, source, name, business_key, key_parts,
			operation_key, destination, params, params_sha256, state, owner, max_attempts, give_up_at, next_attempt_at, after_id,
			attempt_key)
			VALUES ($1, 'live', 'stripe-live', $2, 'k', '["k"]', 'oh_' || md5(random()::text), $3, '{}', '\x00', $4,
			        'ops@example.com', 3, now() + interval '1 hour', `+a.due+`, `+after+`, $5)`,
			a.client, a.name, a.dest, a.state, a.attemptKey); err != nil {
			t.Fatal(err)
		}
	}
	base := db.ActionClaimParams{Client: "acme", MaxActions: 100, Worker: "w1", LeaseSeconds: 30,
		Callable: []string{"crm", "down", "slow"}, FillNames: []string{"with_result"},
		OnlyDestinations: []string{}, SkipDestinations: []string{}}
	only, skip, few := base, base, base
	only.OnlyDestinations, skip.SkipDestinations, few.MaxActions = []string{"slow"}, []string{"slow"}, 2
	for name, p := range map[string]db.ActionClaimParams{"every destination": base, "one destination on its own": only,
		"skipping one destination": skip, "fewer than are due": few} {
		t.Run(name, func(t *testing.T) {
			single := agree(t, pool, nil, func(t *testing.T, s store.Store, tx pgx.Tx, q *db.Queries) []claimed {
				return claimWith(t, tx, q, s, p)
			})
			if len(single) == 0 {
				t.Errorf("nothing claimed")
			}
		})
	}
}

// claimWith claims with one form in tx, and returns what it did to each action
// it claimed, by action id (neither form orders its rows: the calls of a claim
// start together).
func claimWith(t *testing.T, tx pgx.Tx, q *db.Queries, form store.Store, p db.ActionClaimParams) []claimed {
	t.Helper()
	ctx := context.Background()
	rows, err := form.ClaimActions(ctx, q, p)
	if err != nil {
		t.Fatalf("claim (%T): %v", form, err)
	}
	slices.SortFunc(rows, func(a, b db.ActionClaimRow) int { return cmp.Compare(a.ID, b.ID) })
	out := make([]claimed, len(rows))
	for i, r := range rows {
		c := &out[i]
		c.Started = r.AttemptID != 0
		if err := tx.QueryRow(ctx, `SELECT client, name, state, claimed_from, coalesce(lease_owner, ''), attempts,
			first_attempt_at IS NOT NULL FROM actions WHERE client = $1 AND id = $2`, r.Client, r.ID).
			Scan(&c.Client, &c.Name, &c.State, &c.ClaimedFrom, &c.LeaseOwner, &c.Attempts, &c.FirstAttemptSet); err != nil {
			t.Fatal(err)
		}
		if c.Started {
			if err := tx.QueryRow(ctx, `SELECT status, kind, worker, operation_key FROM attempts WHERE client = $1 AND id = $2 AND action_id = $3`,
				r.Client, r.AttemptID, r.ID).Scan(&c.AttemptStatus, &c.AttemptKind, &c.AttemptWorker, &c.AttemptKey); err != nil {
				t.Fatalf("the started attempt %d: %v", r.AttemptID, err)
			}
		}
	}
	return out
}
