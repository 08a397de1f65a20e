package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/partitions"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// The growth rows' history, filled as `make bench` fills ten million actions but
// at 10,000: the first 4,000 into the indexed tables, the next 6,000 with the
// indexes dropped and built again. Every action has its event, link, body and
// calls in its own day's partitions, the states and causes are mixed as the
// bench's figures assume, the long history is long, and the indexes and
// constraints are the migrations' again, valid, the foreign keys holding.
func TestHistoryFill(t *testing.T) {
	ctx := context.Background()
	pool, _ := dbtest.NewDSN(t)
	now := time.Now()
	// The days' partitions first, so that the shape compared is the migrations'.
	if _, err := partitions.Make(ctx, db.New(pool), now.Add(-fillSpan).AddDate(0, 0, -1), now.AddDate(0, 0, 1)); err != nil {
		t.Fatal(err)
	}
	before := schemaShape(t, pool)
	clients := []string{"acme", "globex", "initech"}
	var told []int
	f := &historyFill{pool: pool, clients: clients, total: 10_000, now: now, dataDir: t.TempDir(), bulk: 5_000, parallel: 2,
		names: func(c string) (string, string) { return "stripe-" + c, "open_" + c },
		progress: func(done, of int, _ time.Duration) {
			told = append(told, done)
			if of != 4_000 && of != 6_000 {
				t.Errorf("progress of %d, want 4,000 or 6,000", of)
			}
		}}
	if err := f.fill(ctx, 1, 4_000); err != nil {
		t.Fatal(err)
	}
	if got := schemaShape(t, pool); got != before {
		t.Fatalf("the indexed fill changed the schema:\n%s\nwant\n%s", got, before)
	}
	if err := f.fill(ctx, 4_001, 10_000); err != nil {
		t.Fatal(err)
	}
	if got := schemaShape(t, pool); got != before {
		t.Fatalf("the bulk fill left the indexes and constraints otherwise than the migrations made them:\n%s\nwant\n%s", got, before)
	}
	if len(told) != 2*len(clients) || told[len(told)-1] != 6_000 {
		t.Errorf("progress told %v, want a statement per client and chunk, ending at 6,000", told)
	}

	counts := func(sql string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	for sql, want := range map[string]int{
		`SELECT count(*) FROM actions`:                                                                                          10_000,
		`SELECT count(DISTINCT business_key) FROM actions`:                                                                      10_000,
		`SELECT count(*) FROM actions WHERE state = 'failed'`:                                                                   500,
		`SELECT count(*) FROM actions WHERE state = 'resolved'`:                                                                 100,
		`SELECT count(*) FROM actions WHERE state = 'cancelled'`:                                                                100,
		`SELECT count(*) FROM actions WHERE state = 'confirmed'`:                                                                9_300,
		`SELECT count(DISTINCT reason_start) FROM actions WHERE state = 'failed'`:                                               3,
		`SELECT count(*) FROM events WHERE status = 'routed'`:                                                                   10_000,
		`SELECT count(*) FROM action_events`:                                                                                    10_000,
		`SELECT count(*) FROM event_bodies b JOIN events e ON e.client = b.client AND e.id = b.event_id AND e.body_day = b.day`: 10_000,
		// Every action's calls and acts are in its day's partition.
		`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id AND a.rows_day = t.part_day`:    counts(`SELECT sum(attempts) FROM actions`),
		`SELECT count(*) FROM audit u JOIN actions a ON a.client = u.client AND a.id = u.action_id AND a.rows_day = u.part_day`:       counts(`SELECT count(*) FROM audit`),
		`SELECT count(*) FROM actions a WHERE NOT EXISTS (SELECT 1 FROM attempts t WHERE t.client = a.client AND t.action_id = a.id)`: 0,
		`SELECT count(*) FROM actions WHERE state IN ('resolved', 'cancelled') AND NOT EXISTS
		    (SELECT 1 FROM audit u WHERE u.client = actions.client AND u.action_id = actions.id)`: 0,
		`SELECT count(*) FROM attempts t JOIN actions a USING (client) WHERE a.id = t.action_id AND a.business_key = 'enq_g_500'`: 60,
		`SELECT count(*) FROM audit u JOIN actions a USING (client) WHERE a.id = u.action_id AND a.business_key = 'enq_g_500'`:    40,
		`SELECT count(*) FROM actions WHERE param_values IS DISTINCT FROM action_param_values(params)`:                            0,
		`SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid WHERE NOT i.indisvalid`:                          0,
	} {
		if got := counts(sql); got != want {
			t.Errorf("%s: %d, want %d", strings.Join(strings.Fields(sql), " "), got, want)
		}
	}
	// Spread over the clients and the days, the newest at the fill's time.
	for _, c := range clients {
		if n := counts(`SELECT count(*) FROM actions WHERE client = '` + c + `'`); n < 3_333 || n > 3_334 {
			t.Errorf("client %s has %d actions, want a third", c, n)
		}
	}
	if days := counts(`SELECT count(DISTINCT rows_day) FROM actions`); days < 30 {
		t.Errorf("the actions are on %d days, want the 30 days before the fill", days)
	}
	var newest, oldest time.Time
	if err := pool.QueryRow(ctx, `SELECT max(created_at), min(created_at) FROM actions`).Scan(&newest, &oldest); err != nil {
		t.Fatal(err)
	}
	if d := now.Sub(newest); d < 0 || d > time.Hour {
		t.Errorf("the newest action was created %s before the fill", d)
	}
	if d := now.Sub(oldest); d < fillSpan-time.Hour || d > fillSpan {
		t.Errorf("the oldest action was created %s before the fill, want about %s", d, fillSpan)
	}
	// The foreign key built again holds: an orphan link is refused.
	if _, err := pool.Exec(ctx, `INSERT INTO action_events (client, action_id, event_id, params, params_sha256)
		VALUES ('acme', -1, -1, '{}', '\x00')`); err == nil || !strings.Contains(err.Error(), "foreign key") {
		t.Errorf("a link to no action: %v, want the foreign key's refusal", err)
	}
	// The unique constraints built again hold, and the sequences are past the ids.
	if _, err := pool.Exec(ctx, `INSERT INTO events (client, environment, source, source_event_id, type, body_sha256)
		VALUES ('acme', 'live', 'stripe-acme', 'evt_g_3', 'x', '\x00')`); err == nil || !strings.Contains(err.Error(), "duplicate key") {
		t.Errorf("a second evt_g_3: %v, want the unique constraint's refusal", err)
	}
	if n := counts(`SELECT count(*) FROM attempts WHERE id >= (SELECT last_value FROM attempts_id_seq)`); n != 0 {
		t.Errorf("%d attempts have ids at or past their sequence", n)
	}
}

// schemaShape is the definition of every index and constraint of the filled
// tables (their partitions' included), one a line.
func schemaShape(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := pool.QueryRow(context.Background(), `
		SELECT string_agg(d, E'\n' ORDER BY d) FROM (
		    SELECT i.indrelid::regclass || ': ' || pg_get_indexdef(i.indexrelid) AS d FROM pg_index i
		    JOIN pg_class c ON c.oid = i.indrelid
		    WHERE c.relname ~ '^(actions|events|action_events|event_bodies|attempts|audit)(_[0-9]{8})?$'
		    UNION ALL
		    SELECT conrelid::regclass || ': ' || conname || ' ' || pg_get_constraintdef(oid) FROM pg_constraint
		    WHERE conrelid::regclass::text ~ '^(actions|events|action_events|event_bodies|attempts|audit)$') x`).Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

// The disk check says what a fill needs and what is free, in plain words.
func TestDiskEnoughSaysWhatItNeeds(t *testing.T) {
	if err := diskEnough(1_000, 1<<40, "/data"); err != nil {
		t.Errorf("a terabyte for a thousand actions: %v", err)
	}
	err := diskEnough(10_000_000, 5<<30, "/data")
	if err == nil {
		t.Fatal("ten million actions in 5 GiB: no error")
	}
	for _, want := range []string{"10,000,000 actions", "28.6 GiB", "/data", "5.0 GiB", "-rows"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
}
