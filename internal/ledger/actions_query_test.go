package ledger_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
)

// fillActions adds n actions from..to spread over every state, owner, source and
// client, created one second apart in id order.
func fillActions(t *testing.T, pool *pgxpool.Pool, from, to int, stateExpr string) {
	t.Helper()
	_, err := pool.Exec(context.Background(), `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, owner, max_attempts, give_up_at, next_attempt_at,
    external_ref, created_at)
SELECT 'c' || (i % 2), 'live', 's' || (i % 3), 'n' || (i % 2), 'enq_' || i, '[]', 'op_' || i,
       'd' || (i % 2), '{}', '\x00', `+stateExpr+`,
       (ARRAY['', 'o1', 'o2'])[1 + i % 3], 3, now() + interval '1 hour', '9999-12-31',
       CASE WHEN i % 5 = 0 THEN 'ref_' || i ELSE '' END,
       timestamptz '2026-01-01' + make_interval(secs => i)
FROM generate_series($1::int, $2::int) AS i`, from, to)
	if err != nil {
		t.Fatal(err)
	}
}

// plainIDs runs a plain query for ids: what a shaped query must still return.
func plainIDs(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) []int64 {
	t.Helper()
	rows, err := pool.Query(context.Background(), sql, args...)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		t.Fatal(err)
	}
	return append([]int64{}, ids...) // an empty result compares equal to an empty page
}

// naiveList is ActionList as one plain scan: what the shaped query must still
// return, in each order (%s: the order's keyset condition and ORDER BY).
const naiveList = `
SELECT a.id FROM actions a
WHERE (cardinality($1::text[]) = 0 OR a.state = ANY($1::text[]))
  AND ($2 = '' OR a.source = $2) AND ($3 = '' OR a.owner = $3)
  AND ($4 = '' OR starts_with(lower(a.business_key), lower($4)) OR a.operation_key = $4
       OR a.external_ref = $4 OR a.owner = $4 OR action_param_values(a.params) @> jsonb_build_array(lower($4))
       OR (a.state IN ('held', 'uncertain', 'failed') AND strpos(lower(a.reason), lower($4)) > 0)
       OR EXISTS (SELECT 1 FROM action_events ae JOIN events e ON e.client = ae.client AND e.id = ae.event_id
                  WHERE ae.client = a.client AND ae.action_id = a.id AND e.source_event_id = $4))
  AND %s LIMIT $5`

var naiveOrders = map[string]string{
	"-created":     `($6::bigint IS NULL OR a.id < $6) AND $7::timestamptz IS NULL ORDER BY a.id DESC`,
	"created":      `($6::bigint IS NULL OR a.id > $6) AND $7::timestamptz IS NULL ORDER BY a.id`,
	"state_since":  `a.state NOT IN ('confirmed', 'resolved', 'cancelled') AND ($6::bigint IS NULL OR (a.state_since, a.id) > ($7, $6)) ORDER BY a.state_since, a.id`,
	"-state_since": `a.state NOT IN ('confirmed', 'resolved', 'cancelled') AND ($6::bigint IS NULL OR (a.state_since, a.id) < ($7, $6)) ORDER BY a.state_since DESC, a.id DESC`,
}

func TestActionListMatchesPlainScan(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	fillActions(t, pool, 1, 600, `(ARRAY['pending','processing','retrying','held','uncertain','failed','confirmed','resolved','cancelled'])[1 + (i * 7) % 9]`)
	// Times in the state that are not in the ids' order, some of them equal (from
	// 2026-02-01 UTC back, by to_timestamp: immutable, as Citus asks in an UPDATE).
	if _, err := pool.Exec(ctx, `UPDATE actions SET state_since = to_timestamp(1769904000 - 60 * ((id * 37) % 101))`); err != nil {
		t.Fatal(err)
	}
	// Events evt_<i % 80> asked for some actions: the search finds an action by
	// any event that asked for it.
	if _, err := pool.Exec(ctx, `
WITH ev AS (
    INSERT INTO events (client, environment, source, source_event_id, type, body_sha256)
    SELECT 'c' || (i % 2), 'live', 's' || (i % 3), 'evt_' || i, 't', '\x00' FROM generate_series(0, 79) AS i
    RETURNING client, id, source, source_event_id)
INSERT INTO action_events (client, action_id, event_id, params, params_sha256)
SELECT a.client, a.id, ev.id, '{}', '\x00' FROM actions a
JOIN ev ON ev.client = a.client AND ev.source = a.source AND ev.source_event_id = 'evt_' || (a.id % 80)
WHERE a.id % 7 = 0`); err != nil {
		t.Fatal(err)
	}
	var midAt time.Time
	if err := pool.QueryRow(ctx, `SELECT state_since FROM actions WHERE id = 300`).Scan(&midAt); err != nil {
		t.Fatal(err)
	}
	q := db.New(db.PlannedPerCall(pool))
	mid := int64(300)
	list := q.ActionList // on Citus its Citus form, which the plain scan checks as well
	if dbtest.OnCitus() {
		list = func(ctx context.Context, p db.ActionListParams) ([]db.Action, error) {
			return db.ActionListByClient(ctx, q, p, []string{"c0", "c1"})
		}
	}
	for sort, order := range naiveOrders {
		naive := fmt.Sprintf(naiveList, order)
		for _, states := range [][]string{{}, {"failed"}, {"uncertain", "held"}, {"pending", "processing", "retrying", "held"}, {"confirmed", "nope"}} {
			// The ledger says so for the states that wait for a person, sorted by waiting.
			person := strings.HasSuffix(sort, "state_since") && len(states) > 0 && !slices.ContainsFunc(states, func(s string) bool {
				return s != "held" && s != "uncertain" && s != "failed"
			})
			for _, source := range []string{"", "s2"} {
				for _, owner := range []string{"", "o1"} {
					for _, search := range []string{"", "enq_17", "enq_1", "ENQ_1", "en_", "en%", "op_42", "ref_100", "o2", "evt_14", "evt_3"} {
						for _, cursor := range []*int64{nil, &mid} {
							var at *time.Time
							if cursor != nil && strings.HasSuffix(sort, "state_since") {
								at = &midAt
							}
							for _, limit := range []int32{50, 7} {
								name := fmt.Sprintf("%s/%v/%s/%s/%s/%v/%d", sort, states, source, owner, search, cursor != nil, limit)
								got, err := list(ctx, db.ActionListParams{AllClients: true, States: states, Source: source, Owner: owner,
									Q: search, Clients: []string{"c0", "c1"}, Sources: []string{"s0", "s1", "s2"},
									Sort: sort, PersonStates: person, CursorID: cursor, CursorAt: at, StateRows: limit, MaxRows: limit})
								if err != nil {
									t.Fatalf("%s: %v", name, err)
								}
								gotIDs := []int64{}
								for _, a := range got {
									gotIDs = append(gotIDs, a.ID)
								}
								wantIDs := plainIDs(t, pool, naive, states, source, owner, search, limit, cursor, at)
								if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
									t.Errorf("%s: ids (-plain scan +ActionList):\n%s", name, diff)
								}
							}
						}
					}
				}
			}
		}
	}
}

func TestActionCountByState(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	type count struct {
		State  string
		N      int64
		Oldest time.Time
	}
	counts := func() []count {
		t.Helper()
		rows, err := countByState(ctx, db.New(db.PlannedPerCall(pool)))
		if err != nil {
			t.Fatal(err)
		}
		var out []count
		for _, r := range rows {
			out = append(out, count{r.State, r.N, r.Oldest.UTC()})
		}
		return out
	}
	t.Run("ExactWhileSmall", func(t *testing.T) {
		fillActions(t, pool, 1, 300, `(ARRAY['pending','failed','confirmed','cancelled'])[1 + i % 4]`)
		var want []count
		rows, err := pool.Query(ctx, `SELECT state, count(*), min(created_at) FROM actions GROUP BY state ORDER BY state`)
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var c count
			if err := rows.Scan(&c.State, &c.N, &c.Oldest); err != nil {
				t.Fatal(err)
			}
			c.Oldest = c.Oldest.UTC()
			want = append(want, c)
		}
		if diff := cmp.Diff(want, counts()); diff != "" {
			t.Errorf("counts (-GROUP BY +ActionCountByState):\n%s", diff)
		}
	})
	t.Run("EstimatedWhenLarge", func(t *testing.T) {
		fillActions(t, pool, 301, 2800, `'confirmed'`)
		if _, err := pool.Exec(ctx, `ANALYZE actions`); err != nil {
			t.Fatal(err)
		}
		for _, c := range counts() {
			if c.State != "confirmed" {
				continue
			}
			// 75 from the first 300, then 2,500; ANALYZE reads every row of a table this small.
			if c.N < 2574 || c.N > 2576 {
				t.Errorf("confirmed = %d, want about 2575", c.N)
			}
		}
	})
}

// EventList finds received events through event_queue and every other status by
// walking the inbox: either way it returns what one plain scan of events returns.
func TestEventListMatchesPlainScan(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	// 300 events, one in ten still received (the insert trigger queues those).
	_, err := pool.Exec(ctx, `
INSERT INTO events (client, environment, source, source_event_id, type, status, body, body_sha256)
SELECT 'c' || (i % 2), 'live', 's' || (i % 3), 'evt_' || i, 't',
       CASE WHEN i % 10 = 0 THEN 'received' ELSE (ARRAY['routed', 'ignored', 'conflict'])[1 + i % 3] END,
       '\x7b7d', '\x00'
FROM generate_series(1, 300) AS i`)
	if err != nil {
		t.Fatal(err)
	}
	var queued int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM event_queue`).Scan(&queued); err != nil {
		t.Fatal(err)
	}
	if queued != 30 {
		t.Fatalf("%d events queued, want the 30 received (the test's premise)", queued)
	}
	q := db.New(pool)
	mid := int64(150)
	for _, status := range []string{"received", "", "routed", "nope"} {
		for _, source := range []string{"", "s1"} {
			for _, before := range []*int64{nil, &mid} {
				for _, limit := range []int32{50, 7} {
					name := fmt.Sprintf("%q/%s/%v/%d", status, source, before != nil, limit)
					got, err := q.EventList(ctx, db.EventListParams{AllClients: true, Source: source, Status: status, BeforeID: before, MaxRows: limit})
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					gotIDs := []int64{}
					for _, e := range got {
						gotIDs = append(gotIDs, e.ID)
					}
					wantIDs := plainIDs(t, pool, `SELECT id FROM events
						WHERE ($1 = '' OR status = $1) AND ($2 = '' OR source = $2)
						  AND ($3::bigint IS NULL OR id < $3) ORDER BY id DESC LIMIT $4`, status, source, before, limit)
					if diff := cmp.Diff(wantIDs, gotIDs); diff != "" {
						t.Errorf("%s: ids (-plain scan +EventList):\n%s", name, diff)
					}
				}
			}
		}
	}
}

// countByState is ActionCountByState, or on Citus its form client by client.
func countByState(ctx context.Context, q *db.Queries) ([]db.ActionCountByStateRow, error) {
	if !dbtest.OnCitus() {
		return q.ActionCountByState(ctx)
	}
	return db.ActionCountByClient(ctx, q, []string{"c0", "c1"}, nil)
}

// TestReasonFilterReadsTheNewestOfEachState: a part of the reason is looked for
// among each state's newest review.ReasonWalk actions under the rest of the
// filter, and the page says so when a state holds more. An older action whose
// reason matches is found once another filter narrows the walk to it.
func TestReasonFilterReadsTheNewestOfEachState(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	n := review.ReasonWalk + 1000
	if _, err := pool.Exec(ctx, `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, reason, max_attempts, give_up_at)
SELECT 'c0', 'live', CASE WHEN i = 1 THEN 'old-source' ELSE 's' END, 'n', 'enq_' || i, '[]', 'op_' || i, 'd', '{}', '\x00',
       CASE WHEN i > $1 THEN 'failed' ELSE 'confirmed' END,
       CASE WHEN i IN (1, $1 - 10) OR i > $1 THEN 'the destination refused it: 422 amount must be positive'
            ELSE '2xx from destination: HTTP 201' END,
       3, now() + interval '1 hour'
FROM generate_series(1, $1 + 3) AS i`, n); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `ANALYZE actions`); err != nil {
		t.Fatal(err)
	}
	rv := review.New(pool, &settings.Config{Sources: []settings.Source{{Name: "s", Client: "c0"}}}, nil)
	keys := func(f review.ActionFilter) ([]string, bool) {
		t.Helper()
		page, err := rv.ListActions(ctx, f)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, a := range page.Actions {
			out = append(out, a.BusinessKey)
		}
		slices.Sort(out)
		return out, page.ReasonWalked
	}
	got, walked := keys(review.ActionFilter{Reason: "amount"})
	want := []string{fmt.Sprintf("enq_%d", n-10), fmt.Sprintf("enq_%d", n+1), fmt.Sprintf("enq_%d", n+2), fmt.Sprintf("enq_%d", n+3)}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("reason amount: %v, want %v (the oldest confirmed one lies past the walk)", got, want)
	}
	if !walked && !dbtest.OnCitus() { // on Citus the count past 1,000 is a shard's estimate
		t.Error("the page does not say the walk stopped, though confirmed holds more than it reads")
	}
	if got, walked := keys(review.ActionFilter{Reason: "amount", States: []string{"failed"}}); len(got) != 3 || walked {
		t.Errorf("reason amount among the failed: %v (walked past: %v), want the three, read whole", got, walked)
	}
	if got, _ := keys(review.ActionFilter{Reason: "amount", Source: "old-source"}); !slices.Equal(got, []string{"enq_1"}) {
		t.Errorf("reason amount from old-source: %v, want enq_1, reached once the source narrows the walk", got)
	}
}
