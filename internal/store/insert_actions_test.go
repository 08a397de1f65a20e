package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/store"
)

// insertedAction is what an insert decided for an action, with its times read as
// what the rule says of them.
type insertedAction struct {
	Client, Name, OperationKey, State, Reason string
	AfterID                                   *int64
	DueNow                                    bool // next_attempt_at is now, not the far future of a waiting successor
}

// InsertActions has two forms, one statement on a single Postgres and one row a
// statement on Citus (actionInsertOne gives each row the state, reason and due
// time ActionInsert's CASEs give it). Both run here, each in a transaction
// rolled back, on the same rows in every case the rule tells apart: they must
// create the same actions, so that a change to one form alone fails this test.
func TestInsertActionsFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	q := db.New(pool)
	// The predecessors, one in each state a successor reads, and a destination
	// that is disconnected.
	preds := map[string]int64{}
	for i, state := range []string{ledger.StatePending, ledger.StateConfirmed, ledger.StateResolved, ledger.StateFailed} {
		p := insertParams(row{client: "acme", name: "first_" + state, key: fmt.Sprint("pred-", i), dest: "crm"})
		created, err := q.ActionInsert(ctx, p)
		if err != nil || len(created) != 1 {
			t.Fatalf("insert predecessor: %v %v", created, err)
		}
		preds[state] = created[0].ID
		if _, err := pool.Exec(ctx, `UPDATE actions SET state = $1 WHERE id = $2`, state, created[0].ID); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := pool.Exec(ctx, `INSERT INTO destinations (name, status, reason, changed_at)
		VALUES ('down', 'disconnected', 'refused', now())`); err != nil {
		t.Fatal(err)
	}
	existing, err := q.ActionInsert(ctx, insertParams(row{client: "acme", name: "welcome", key: "existing", dest: "crm"}))
	if err != nil || len(existing) != 1 {
		t.Fatalf("insert the existing action: %v %v", existing, err)
	}
	cases := map[string][]row{
		"new, no predecessor":            {{client: "acme", name: "welcome", key: "k1", dest: "crm"}},
		"destination disconnected":       {{client: "acme", name: "welcome", key: "k2", dest: "down"}},
		"after a pending predecessor":    {{client: "acme", name: "next", key: "k3", dest: "crm", after: preds[ledger.StatePending]}},
		"after a confirmed predecessor":  {{client: "acme", name: "next", key: "k4", dest: "crm", after: preds[ledger.StateConfirmed]}},
		"after a resolved predecessor":   {{client: "acme", name: "next", key: "k5", dest: "crm", after: preds[ledger.StateResolved]}},
		"after a failed predecessor":     {{client: "acme", name: "next", key: "k6", dest: "crm", after: preds[ledger.StateFailed]}},
		"after a predecessor not found":  {{client: "acme", name: "next", key: "k7", dest: "crm", after: 999999}},
		"held, after a pending one":      {{client: "acme", name: "next", key: "k8", dest: "down", after: preds[ledger.StatePending]}},
		"the operation exists already":   {{client: "acme", name: "welcome", key: "existing", dest: "crm"}},
		"one operation twice in a batch": {{client: "acme", name: "welcome", key: "k9", dest: "crm"}, {client: "acme", name: "welcome", key: "k9", dest: "down"}},
		"a run of two clients":           {{client: "acme", name: "welcome", key: "k10", dest: "crm"}, {client: "beta", name: "welcome", key: "k10", dest: "crm"}},
		"in a cutover, looked up first":  {{client: "acme", name: "welcome", key: "k11", dest: "crm", cutover: ledger.StateUncertain}},
		"in a cutover, after a pending one, disconnected": {{client: "acme", name: "next", key: "k12", dest: "down",
			after: preds[ledger.StatePending], cutover: ledger.StateUncertain}},
		"in a cutover, without a lookup": {{client: "acme", name: "welcome", key: "k13", dest: "crm", cutover: ledger.StateFailed}},
	}
	for name, rows := range cases {
		t.Run(name, func(t *testing.T) {
			single := agree(t, pool, nil, func(t *testing.T, s store.Store, tx pgx.Tx, q *db.Queries) []insertedAction {
				return insertWith(t, tx, q, s, rows...)
			})
			if len(rows) > 0 && name != "the operation exists already" && len(single) == 0 {
				t.Errorf("no action created")
			}
		})
	}
}

type row struct {
	client, name, key, dest string
	after                   int64
	cutover                 string // the state a cutover gives it; "" for none
}

func (r row) cutoverReason() string {
	if r.cutover == "" {
		return ""
	}
	return "cutover: " + r.cutover
}

func insertParams(rows ...row) db.ActionInsertParams {
	p := db.ActionInsertParams{ReadyState: ledger.RuleOf[ledger.ObsCreated].Next, HeldState: ledger.RuleOf[ledger.ObsCreatedDisconnected].Next}
	for _, r := range rows {
		id := ledger.OperationIdentity{Client: r.client, Environment: "live", Name: r.name, KeyParts: []string{r.key}}
		keys, _ := json.Marshal(id.KeyParts)
		p.Clients, p.Environments = append(p.Clients, r.client), append(p.Environments, "live")
		p.Sources, p.Names = append(p.Sources, "stripe-live"), append(p.Names, r.name)
		p.BusinessKeys, p.KeyParts = append(p.BusinessKeys, id.BusinessKey()), append(p.KeyParts, keys)
		p.OperationKeys, p.Destinations = append(p.OperationKeys, id.OperationKey()), append(p.Destinations, r.dest)
		p.Params, p.ParamsSha256s = append(p.Params, json.RawMessage(`{"a":1}`)), append(p.ParamsSha256s, []byte{1})
		p.Owners, p.AfterIds, p.Resources = append(p.Owners, "ops@example.com"), append(p.AfterIds, r.after), append(p.Resources, "")
		p.OccurredAts, p.HasOccurredAts = append(p.OccurredAts, time.Time{}), append(p.HasOccurredAts, false)
		p.MaxAttempts, p.WithinSeconds = append(p.MaxAttempts, 3), append(p.WithinSeconds, 3600)
		p.CutoverStates, p.CutoverReasons = append(p.CutoverStates, r.cutover), append(p.CutoverReasons, r.cutoverReason())
	}
	return p
}

// insertWith inserts rows with one form of InsertActions in tx, and returns the
// actions it created as the rule reads them.
func insertWith(t *testing.T, tx pgx.Tx, q *db.Queries, form store.Store, rows ...row) []insertedAction {
	t.Helper()
	ctx := context.Background()
	created, err := form.InsertActions(ctx, q, insertParams(rows...))
	if err != nil {
		t.Fatalf("insert (%T): %v", form, err)
	}
	var out []insertedAction
	for _, c := range created {
		var a insertedAction
		err := tx.QueryRow(ctx, `SELECT client, name, operation_key, state, reason, after_id,
			next_attempt_at < '9999-01-01' FROM actions WHERE client = $1 AND id = $2`, c.Client, c.ID).
			Scan(&a.Client, &a.Name, &a.OperationKey, &a.State, &a.Reason, &a.AfterID, &a.DueNow)
		if err != nil && err != pgx.ErrNoRows {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}
