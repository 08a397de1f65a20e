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
)

// On a local Citus cluster (make test-citus) the migrations distribute every table
// of a client's work by client, co-located, and make the shared ones reference
// tables; a flow through the ledger works on it, and the events of a dozen clients
// land on both workers. On a single Postgres the database says it is one, and
// distributing it changes nothing.
func TestDatabaseIsShardedByClientOnCitus(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	w := newWorld(t, worldOptions{})
	mode, err := db.New(w.pool).DatabaseMode(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !dbtest.OnCitus() {
		if mode != "single" {
			t.Fatalf("database mode %q on a single Postgres, want single", mode)
		}
		if got, err := db.New(w.pool).DatabaseDistribute(ctx); err != nil || got != "single" {
			t.Fatalf("distribute on a single Postgres: %q, %v; want single and nothing done", got, err)
		}
		return
	}
	if mode != "citus" {
		t.Fatalf("database mode %q on the Citus cluster, want citus", mode)
	}
	checkCitusTables(t, w.pool)
	w.deliver(checkout{eventID: "evt_citus", enquiry: "enq_citus", amount: 4200})
	defer func() {
		if t.Failed() {
			t.Log(w.logs.String())
		}
	}()
	waitUntil(t, 20*time.Second, "the checkout's opportunity confirmed", func() bool {
		return w.count(`SELECT count(*) FROM actions WHERE client = 'acme' AND name = 'open_opportunity' AND state = 'confirmed'`) == 1
	})
	w.exec(`INSERT INTO events (client, environment, source, source_event_id, type, body, body_sha256)
SELECT 'client_' || (i % 12), 'live', 'stripe-live', 'evt_spread_' || i, 'ping', '{}', '\x00'
FROM generate_series(1, 120) AS i`)
	checkBothWorkersHold(t, w.pool, "events")
}

// checkCitusTables checks every table of the schema against the rule of
// distribution (migration 00024): a table with a client column is distributed by
// client, co-located with events; every other table is a reference table. A table
// a later migration adds and the distribution missed (left local) fails here.
func checkCitusTables(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT c.relname::text,
       EXISTS (SELECT 1 FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attname = 'client' AND NOT a.attisdropped),
       coalesce(ct.citus_table_type, 'local') || ' ' || coalesce(ct.distribution_column, '')
       || CASE WHEN ct.citus_table_type = 'distributed'
               THEN CASE WHEN ct.colocation_id = (SELECT colocation_id FROM citus_tables WHERE table_name = 'events'::regclass)
                         THEN ' co-located' ELSE ' apart' END
               ELSE '' END
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace AND n.nspname = 'public'
LEFT JOIN citus_tables ct ON ct.table_name = c.oid
WHERE c.relkind IN ('r', 'p') AND c.relname <> 'goose_db_version' AND NOT relation_is_a_known_shard(c.oid)
ORDER BY c.relname`)
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	for rows.Next() {
		var name, held string
		var perClient bool
		if err := rows.Scan(&name, &perClient, &held); err != nil {
			t.Fatal(err)
		}
		got = append(got, name+" "+held)
		if perClient {
			want = append(want, name+" distributed client co-located")
		} else {
			want = append(want, name+" reference <none>")
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"events", "actions", "users"} { // the rule's reading of the schema found them
		if !slices.ContainsFunc(got, func(s string) bool { return strings.HasPrefix(s, name+" ") }) {
			t.Errorf("table %s is not among the schema's tables: %v", name, got)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("the tables as Citus holds them (-want +got):\n%s", diff)
	}
}

// checkBothWorkersHold fails unless each worker holds rows of table.
func checkBothWorkersHold(t *testing.T, pool *pgxpool.Pool, table string) {
	t.Helper()
	rows, err := pool.Query(context.Background(), `
SELECT s.nodename || ':' || s.nodeport, sum(r.result::bigint)::bigint
FROM run_command_on_shards($1::regclass, 'SELECT count(*) FROM %s') r
JOIN citus_shards s ON s.shardid = r.shardid
GROUP BY 1 ORDER BY 1`, table)
	if err != nil {
		t.Fatal(err)
	}
	perNode := map[string]int64{}
	for rows.Next() {
		var node string
		var n int64
		if err := rows.Scan(&node, &n); err != nil {
			t.Fatal(err)
		}
		perNode[node] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	holding := 0
	for _, n := range perNode {
		if n > 0 {
			holding++
		}
	}
	if len(perNode) != 2 || holding != 2 {
		t.Errorf("rows of %s per worker: %v; want rows on both of the two workers", table, perNode)
	}
}

// A database migrated on a single Postgres, which then gets Citus, is distributed
// by oncehook citus distribute (DatabaseDistribute): its rows stay, now in the
// shards of both workers.
func TestCitusDistributeAnExistingDatabase(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if !dbtest.OnCitus() {
		pool := dbtest.New(t)
		if got, err := db.New(pool).DatabaseDistribute(ctx); err != nil || got != "single" {
			t.Fatalf("distribute on a single Postgres: %q, %v; want single and nothing done", got, err)
		}
		return
	}
	pool, addCitus := dbtest.NewUndistributed(t)
	q := db.New(pool)
	if mode, err := q.DatabaseMode(ctx); err != nil || mode != "single" {
		t.Fatalf("before citus: mode %q, %v; want single", mode, err)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (client, environment, source, source_event_id, type, body, body_sha256)
SELECT 'client_' || (i % 12), 'live', 'stripe-live', 'evt_old_' || i, 'ping', '{}', '\x00'
FROM generate_series(1, 120) AS i`); err != nil {
		t.Fatal(err)
	}
	addCitus()
	if mode, err := q.DatabaseMode(ctx); err != nil || mode != "citus-undistributed" {
		t.Fatalf("with citus, before distributing: mode %q, %v; want citus-undistributed", mode, err)
	}
	for i := range 2 { // a second run finds everything done
		if mode, err := q.DatabaseDistribute(ctx); err != nil || mode != "citus" {
			t.Fatalf("distribute, run %d: mode %q, %v; want citus", i+1, mode, err)
		}
	}
	checkCitusTables(t, pool)
	checkBothWorkersHold(t, pool, "events")
	var events, queued int
	if err := pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM events), (SELECT count(*) FROM event_queue)`).Scan(&events, &queued); err != nil {
		t.Fatal(err)
	}
	if events != 120 || queued != 120 {
		t.Errorf("after distributing: %d events, %d in the router's queue; want 120 of each", events, queued)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO events (client, environment, source, source_event_id, type, body, body_sha256)
VALUES ('client_new', 'live', 'stripe-live', 'evt_new', 'ping', '{}', '\x00')`); err != nil {
		t.Fatal(err)
	}
	if n := countIn(t, pool, `SELECT count(*) FROM event_queue WHERE client = 'client_new'`); n != 1 {
		t.Errorf("a new event after distributing: %d queued, want 1", n)
	}
}

func countIn(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(fmt.Errorf("%s: %w", sql, err))
	}
	return n
}

// The rule of distribution holds on a single Postgres too, so a migration that
// would break it fails here, where CI runs: every table of the schema is one the
// rule covers (oncehook_table_kinds), and every unique or primary key of a table
// with a client column includes the client, which Citus requires of a table
// distributed by it.
func TestEveryTableFitsTheRuleOfDistribution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.New(t)
	var uncovered []string
	rows, err := pool.Query(ctx, `
SELECT c.relname::text FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname <> 'goose_db_version'
  AND NOT c.relispartition -- a partition goes with its table (Citus distributes them together)
  AND NOT EXISTS (SELECT 1 FROM oncehook_table_kinds() k WHERE k.tbl = c.oid)
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	if uncovered, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		t.Fatal(err)
	}
	if len(uncovered) > 0 {
		t.Errorf("tables the rule of distribution does not cover: %v", uncovered)
	}
	rows, err = pool.Query(ctx, `
SELECT k.tbl::text || ' ' || i.indexrelid::regclass::text
FROM oncehook_table_kinds() k JOIN pg_index i ON i.indrelid = k.tbl AND i.indisunique
WHERE k.kind = 'distributed'
  AND NOT EXISTS (SELECT 1 FROM pg_attribute a
                  WHERE a.attrelid = k.tbl AND a.attname = 'client' AND a.attnum = ANY(i.indkey::smallint[]))
ORDER BY 1`)
	if err != nil {
		t.Fatal(err)
	}
	withoutClient, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	if len(withoutClient) > 0 {
		t.Errorf("unique keys of per-client tables without the client (Citus refuses them): %v", withoutClient)
	}
	var kinds int
	if err := pool.QueryRow(ctx, `SELECT count(DISTINCT kind) FROM oncehook_table_kinds()`).Scan(&kinds); err != nil {
		t.Fatal(err)
	}
	if kinds != 2 {
		t.Errorf("the rule found %d kinds of tables, want both per-client and shared ones", kinds)
	}
}
