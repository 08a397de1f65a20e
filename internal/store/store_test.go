package store_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/store"
)

// resourceAfter is what a resource's row says once a form cancelled it: its
// times, and whether the cancellation took the transaction's time.
type resourceAfter struct {
	Cancelled, Last *time.Time
	CancelledNow    bool
}

// TestCancelResourceFormsAgree: the single Postgres's and Citus's forms of
// CancelResource leave the same row, from every state a resource can be in,
// with and without the event's own time.
func TestCancelResourceFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	early := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	late := early.Add(24 * time.Hour)
	cases := map[string]struct {
		cancelled, last, occurred *time.Time
	}{
		"new, without the event's time":       {},
		"new, at the event's time":            {occurred: &late},
		"seen before, a later event":          {last: &early, occurred: &late},
		"seen later, an earlier event":        {last: &late, occurred: &early},
		"cancelled before, without a time":    {cancelled: &early, last: &early},
		"cancelled before, at the event time": {cancelled: &early, last: &early, occurred: &late},
	}
	forms := map[string]store.Store{"single": store.Single{}, "sharded": store.Sharded{}}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := map[string]resourceAfter{}
			for form, s := range forms {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback(ctx) //nolint:errcheck // only looked into; a failed step leaves no row behind
				q := db.New(tx)
				if _, err := tx.Exec(ctx, `INSERT INTO resources (client, source, resource, last_occurred_at, cancelled_at)
					VALUES ('acme', 's', 'cs_1', $1, $2)`, c.last, c.cancelled); err != nil {
					t.Fatal(err)
				}
				if err := s.CancelResource(ctx, q, db.ResourceCancelParams{Client: "acme", Source: "s", Resource: "cs_1",
					OccurredAt: c.occurred}); err != nil {
					t.Fatalf("%s: %v", form, err)
				}
				var r resourceAfter
				if err := tx.QueryRow(ctx, `SELECT cancelled_at, last_occurred_at, coalesce(cancelled_at = now(), false) FROM resources
					WHERE client = 'acme' AND source = 's' AND resource = 'cs_1'`).Scan(&r.Cancelled, &r.Last, &r.CancelledNow); err != nil {
					t.Fatal(err)
				}
				if r.CancelledNow {
					r.Cancelled = nil // the transaction's time differs between the two runs
				}
				got[form] = r
				if err := tx.Rollback(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if diff := cmp.Diff(got["single"], got["sharded"]); diff != "" {
				t.Errorf("the two forms disagree (-single +sharded):\n%s", diff)
			}
		})
	}
}

// TestListDestinationsFormsAgree: both forms of ListDestinations list the same
// destinations with the same held counts, for a reader of every client, of one,
// and of none.
func TestListDestinationsFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO destinations (name, status, reason) VALUES ('crm', 'connected', ''), ('mail', 'disconnected', 'token refused'), ('sms', 'connected', '');
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key, destination,
    params, params_sha256, state, max_attempts, give_up_at)
SELECT c, 'live', 's', 'n', c || i, '[]', c || '_' || d || '_' || st || '_' || i, d, '{}', '\x00', st, 3, now() + interval '1 day'
FROM (VALUES ('acme', 'crm', 'held', 2), ('globex', 'crm', 'held', 1), ('acme', 'mail', 'held', 1),
             ('acme', 'crm', 'confirmed', 3), ('globex', 'mail', 'failed', 2)) v(c, d, st, k),
     generate_series(1, v.k) i`); err != nil {
		t.Fatal(err)
	}
	q := db.New(pool)
	for name, scope := range map[string]ledger.Scope{"every client": ledger.EveryClient,
		"acme's reader": {Clients: []string{"acme"}}, "a reader of none": {Clients: []string{}}} {
		single, err := store.Single{}.ListDestinations(ctx, q, scope)
		if err != nil {
			t.Fatal(err)
		}
		sharded, err := store.Sharded{}.ListDestinations(ctx, q, scope)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(single, sharded); diff != "" {
			t.Errorf("%s: the two forms disagree (-single +sharded):\n%s", name, diff)
		}
		if name == "every client" && (len(single) != 3 || single[0].Held != 3 || single[1].Held != 1) {
			t.Errorf("every client: %+v, want crm with 3 held and mail with 1", single)
		}
	}
}

// link is a link as both runs can compare it: by the action's key and the
// event's id, which do not depend on the ids each run drew.
type link struct {
	Action, Event, Params string
	Conflict              bool
}

// TestLinkEventsFormsAgree: both forms of LinkEvents write the same links from
// one batch: new ones, one repeated within the batch and one that existed (both
// left as they were).
func TestLinkEventsFormsAgree(t *testing.T) {
	t.Parallel()
	dbtest.SinglePostgresOnly(t, "the single Postgres's form does not run on Citus: the forms are compared where both run")
	pool := dbtest.New(t)
	ctx := context.Background()
	forms := map[string]store.Store{"single": store.Single{}, "sharded": store.Sharded{}}
	got := map[string][]link{}
	for form, s := range forms {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // only looked into
		var action, ev1, ev2 int64
		if err := tx.QueryRow(ctx, `INSERT INTO actions (client, environment, source, name, business_key, key_parts,
			operation_key, destination, params, params_sha256, max_attempts, give_up_at)
			VALUES ('acme', 'live', 's', 'n', 'enq_1', '[]', 'op_1', 'crm', '{}', '\x00', 3, now()) RETURNING id`).Scan(&action); err != nil {
			t.Fatal(err)
		}
		for i, id := range []*int64{&ev1, &ev2} {
			if err := tx.QueryRow(ctx, `INSERT INTO events (client, environment, source, source_event_id, type, body_sha256)
				VALUES ('acme', 'live', 's', $1, 't', '\x00') RETURNING id`, fmt.Sprintf("evt_%d", i+1)).Scan(id); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := tx.Exec(ctx, `INSERT INTO action_events (client, action_id, event_id, params, params_sha256)
			VALUES ('acme', $1, $2, '{"old":true}', '\x01')`, action, ev1); err != nil {
			t.Fatal(err)
		}
		links := db.ActionEventLinksParams{Clients: []string{"acme", "acme", "acme"}, ActionIds: []int64{action, action, action},
			EventIds: []int64{ev1, ev2, ev2}, Params: []json.RawMessage{json.RawMessage(`{"new":1}`), json.RawMessage(`{"a":2}`),
				json.RawMessage(`{"a":3}`)}, ParamsSha256s: [][]byte{{2}, {3}, {4}}, Conflicts: []bool{false, true, false}}
		if err := s.LinkEvents(ctx, db.New(tx), links); err != nil {
			t.Fatalf("%s: %v", form, err)
		}
		rows, err := tx.Query(ctx, `SELECT a.business_key, e.source_event_id, l.params::text, l.conflict
			FROM action_events l JOIN actions a ON a.client = l.client AND a.id = l.action_id
			JOIN events e ON e.client = l.client AND e.id = l.event_id ORDER BY 1, 2`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var l link
			if err := rows.Scan(&l.Action, &l.Event, &l.Params, &l.Conflict); err != nil {
				t.Fatal(err)
			}
			got[form] = append(got[form], l)
		}
		rows.Close()
		if err := tx.Rollback(ctx); err != nil {
			t.Fatal(err)
		}
	}
	if diff := cmp.Diff(got["single"], got["sharded"]); diff != "" {
		t.Errorf("the two forms disagree (-single +sharded):\n%s", diff)
	}
	if want := []link{{"enq_1", "evt_1", `{"old": true}`, false}, {"enq_1", "evt_2", `{"a": 2}`, true}}; !cmp.Equal(got["single"], want) {
		t.Errorf("the links: %+v, want %+v", got["single"], want)
	}
}
