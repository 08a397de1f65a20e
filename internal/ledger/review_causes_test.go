package ledger_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestWaitingGroupsByCause: the queues' counts and the causes come from one read
// of the open actions. Reasons that differ after their cause's beginning (a long
// provider detail, past the part reason_start keeps) are one cause; held actions
// are one cause per destination whatever their reasons; a pending action behind
// its predecessor is a cause of its own; closed actions count nowhere.
func TestWaitingGroupsByCause(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	long := strings.Repeat("x", 300)
	rejected := string(ledger.ObsRejected)
	rows := []struct {
		state, destination, reason string
		n                          int
		blocked                    bool
	}{
		{"failed", "crm", rejected + ": HTTP 422: amount must be positive", 3, false},
		{"failed", "crm", rejected + ": HTTP 422: " + long, 2, false},
		{"failed", "crm", "gave up after 8 attempts: HTTP 503", 1, false},
		{"failed", "mail", rejected + ": 550 no such mailbox", 1, false},
		{"held", "crm", "crm is disconnected", 2, false},
		{"held", "crm", "reconnect requested by ann@example.com", 1, false},
		{"uncertain", "crm", string(ledger.ObsUnsure) + ": timeout " + long, 4, false},
		{"pending", "crm", "", 2, false},
		{"pending", "mail", "", 3, true},
		{"confirmed", "crm", "2xx from destination: HTTP 201", 5, false},
		{"cancelled", "crm", "cancelled by ann@example.com", 1, false},
	}
	i := 0
	for _, r := range rows {
		for range r.n {
			i++
			next := "now()"
			var after any
			if r.blocked {
				next, after = "'9999-12-31 00:00:00+00'", int64(1)
			}
			if _, err := pool.Exec(ctx, `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, reason, max_attempts, give_up_at, next_attempt_at, after_id)
VALUES ('acme', 'live', 's', 'n', 'k'||$1::int, '[]', 'op'||$1::int, $2, '{}', '\x00', $3, $4, 3,
        now() + interval '1 hour', `+next+`, $5)`, i, r.destination, r.state, r.reason, after); err != nil {
				t.Fatal(err)
			}
		}
	}
	w, err := review.New(pool, &settings.Config{Sources: []settings.Source{{Name: "shop", Client: "acme"}}}, nil).Waiting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wantQueues := map[string]int64{ledger.QueueFailed: 7, ledger.QueueUncertain: 4, ledger.QueueOutstanding: 8}
	for _, q := range w.Queues {
		if q.Count != wantQueues[q.Name] {
			t.Errorf("queue %s counts %d, want %d", q.Name, q.Count, wantQueues[q.Name])
		}
		if q.Oldest.IsZero() {
			t.Errorf("queue %s has no oldest time", q.Name)
		}
	}
	got := map[string]int64{}
	for _, c := range w.Causes {
		got[c.Queue+" | "+c.Label] += c.Count
	}
	want := map[string]int64{
		"failed | crm refused the request":                  5,
		"failed | crm: gave up after retries":               1,
		"failed | mail refused the request":                 1,
		"uncertain | crm: outcome unknown":                  4,
		"outstanding | crm disconnected":                    3,
		"outstanding | crm: waiting for a worker":           2,
		"outstanding | mail: waiting for an earlier action": 3,
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("cause %q counts %d, want %d (all: %v)", k, got[k], n, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("causes %v, want exactly %v", got, want)
	}
	if len(w.Causes) != len(want) {
		t.Errorf("%d cause rows, want one per cause: %+v", len(w.Causes), w.Causes)
	}
	// The largest group first within a queue.
	if w.Causes[0].Label != "crm refused the request" {
		t.Errorf("the first cause is %q, want the largest failed group", w.Causes[0].Label)
	}
}

// TestCountMatchingStopsAtItsCap: under a search, each state is counted up to
// FilterCountCap and says when there are more; a state with fewer is exact.
func TestCountMatchingStopsAtItsCap(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	if _, err := pool.Exec(ctx, `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, owner, max_attempts, give_up_at, next_attempt_at)
SELECT 'acme', 'live', 's', 'n', 'k' || i, '[]', 'op' || i, 'crm', '{}', '\x00',
       CASE WHEN i <= $1 THEN 'failed' ELSE 'confirmed' END,
       'ops@example.com', 3, now() + interval '1 hour', now()
FROM generate_series(1, $1 + 7) AS i`, review.FilterCountCap+5); err != nil {
		t.Fatal(err)
	}
	counts, err := review.New(pool, &settings.Config{}, nil).CountMatching(ctx,
		review.ActionFilter{Q: "ops@example.com"}, []string{ledger.StateFailed, ledger.StateConfirmed, ledger.StateHeld})
	if err != nil {
		t.Fatal(err)
	}
	want := []review.FilterCount{{State: ledger.StateFailed, Count: review.FilterCountCap, More: true},
		{State: ledger.StateConfirmed, Count: 7}, {State: ledger.StateHeld}}
	if fmt.Sprint(counts) != fmt.Sprint(want) {
		t.Errorf("counts %v, want %v", counts, want)
	}
}

// TestWaitingEstimatesLargeGroups: past store.CausesCounted actions a group of
// the queues is not read whole. For a reader of every client its count is the
// planner's, shared among the large groups by how many reasons start as theirs
// ("about"); for a reader of some clients, a lower bound ("1000+"); a small
// group beside them stays exact, and a queue's oldest is exact either way. On
// Citus each shard still groups its own rows whole.
func TestWaitingEstimatesLargeGroups(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	rejected := string(ledger.ObsRejected)
	if _, err := pool.Exec(ctx, `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, reason, max_attempts, give_up_at, state_since)
SELECT 'acme', 'live', 's', 'n', 'k' || i, '[]', 'op' || i, CASE WHEN i <= 3005 THEN 'crm' ELSE 'mail' END,
       '{}', '\x00', CASE WHEN i <= 3010 THEN 'failed' ELSE 'confirmed' END,
       CASE WHEN i <= 2400 THEN $1 || ': HTTP 422: amount must be positive'
            WHEN i <= 3005 THEN $1 || ': HTTP 422: email is not a valid address'
            WHEN i <= 3010 THEN $1 || ': 550 no such mailbox'
            ELSE '2xx from destination: HTTP 201' END,
       3, now() + interval '1 hour', timestamptz '2026-01-01' + make_interval(mins => i)
FROM generate_series(1, 3100) AS i`, rejected); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE actions`); err != nil {
		t.Fatal(err)
	}
	cfg := &settings.Config{Sources: []settings.Source{{Name: "shop", Client: "acme"}}}
	rv := review.New(pool, cfg, nil)
	check := func(who string, w review.Waiting, count int64, about, more bool, causes map[string]string) {
		t.Helper()
		for _, q := range w.Queues {
			if q.Name != ledger.QueueFailed {
				continue
			}
			if q.Count != count || q.About != about || q.More != more {
				t.Errorf("%s: the failed queue counts %d (about %v, more %v), want %d (about %v, more %v)",
					who, q.Count, q.About, q.More, count, about, more)
			}
			if want := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC); !q.Oldest.Equal(want) {
				t.Errorf("%s: the failed queue's oldest entered it at %s, want %s", who, q.Oldest, want)
			}
		}
		got := map[string]string{}
		for _, c := range w.Causes {
			got[c.Label] = fmt.Sprintf("%d about=%v more=%v", c.Count, c.About, c.More)
		}
		for label, want := range causes {
			if got[label] != want {
				t.Errorf("%s: cause %q counts %q, want %q (all: %v)", who, label, got[label], want, got)
			}
		}
	}
	w, err := rv.Waiting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if dbtest.OnCitus() {
		check("an admin", w, 3010, false, false, map[string]string{
			"crm refused the request": "3005 about=false more=false", "mail refused the request": "5 about=false more=false"})
		return
	}
	// ANALYZE read every row of so small a table: the estimates are the counts.
	check("an admin", w, 3010, true, false, map[string]string{
		"crm refused the request": "3005 about=true more=false", "mail refused the request": "5 about=false more=false"})
	w, err = rv.For(ledger.Actor{Name: "op@example.com", Role: settings.RoleOperator, Clients: []string{"acme"}}).Waiting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The amount's 2,400 counted to 1,000 and more, the email's 605 whole.
	check("an operator of acme", w, 1610, false, true, map[string]string{
		"crm refused the request": "1605 about=false more=true", "mail refused the request": "5 about=false more=false"})
}
