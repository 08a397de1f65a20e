package partitions_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/pressly/goose/v3"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/retention"
	"github.com/oncehook/oncehook/migrations"
)

// beforeDays is the last migration before attempts and audit were partitioned
// by day (00039).
const beforeDays = 38

// TestUpgradeThroughDaysKeepsEveryRow upgrades a database of the release before
// 00039, with actions, attempts and audit in it (on Citus, a cluster distributed
// then, as its server did), through the migrations of today: every row is there
// once, in the old day's partition, readable by the action's day; the move of
// the old rows (as `oncehook migrate` does) carries them to today and drops the
// old partitions; and the ids go on where they were.
func TestUpgradeThroughDaysKeepsEveryRow(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dsn := dbtest.NewEmpty(t)
	sqlDB, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer sqlDB.Close()
	provider, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations.FS)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := provider.UpTo(ctx, beforeDays); err != nil {
		t.Fatalf("migrate to %d: %v", beforeDays, err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if mode, err := db.New(pool).DatabaseDistribute(ctx); err != nil {
		t.Fatalf("distribute as the release before did: %v", err)
	} else if dbtest.OnCitus() != (mode == "citus") {
		t.Fatalf("database mode %q, on Citus: %v", mode, dbtest.OnCitus())
	}
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
	// Two clients' actions of the old release, each with a call and a lookup and
	// two audit lines.
	for _, client := range []string{"acme", "globex"} {
		for i := range 3 {
			var id int64
			if err := pool.QueryRow(ctx, `INSERT INTO actions (client, environment, source, name, business_key,
					key_parts, operation_key, destination, params, param_values, params_sha256, state, reason, owner,
					max_attempts, give_up_at, next_attempt_at)
				VALUES ($1, 'live', 'stripe-live', 'open_opportunity', $2, '{}', $3, 'crm', '{}',
					action_param_values('{}'), '', 'confirmed', '', 'sales@example.com', 5, now() + interval '1 day', now())
				RETURNING id`, client, client+"-enq-"+string(rune('a'+i)), client+"-op-"+string(rune('a'+i))).Scan(&id); err != nil {
				t.Fatalf("insert an action of the old release: %v", err)
			}
			for _, kind := range []string{"call", "lookup"} {
				exec(`INSERT INTO attempts (client, action_id, kind, operation_key, worker, status, observed)
					VALUES ($1, $2, $3, 'k', 'w', 'finished', 'created')`, client, id, kind)
			}
			for _, act := range []string{"create", "confirm"} {
				exec(`INSERT INTO audit (client, action_id, actor, act) VALUES ($1, $2, 'system', $3)`, client, id, act)
			}
		}
	}
	count := func(sql string) int {
		t.Helper()
		var n int
		if err := pool.QueryRow(ctx, sql).Scan(&n); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
		return n
	}
	lastAttempt := count(`SELECT max(id) FROM attempts`)

	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatalf("migrate through 00039 and on: %v", err)
	}
	pool.Reset() // the tables were replaced: no statement cached against the old ones
	for _, c := range []struct {
		sql  string
		want int
	}{
		{`SELECT count(*) FROM attempts`, 12},
		{`SELECT count(*) FROM audit`, 12},
		{`SELECT count(*) FROM attempts_19700101`, 12},
		{`SELECT count(*) FROM actions WHERE rows_day = '1970-01-01'`, 6},
		// Each action's rows found by its day, as the readers look for them.
		{`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id
		  AND t.part_day = a.rows_day`, 12},
		{`SELECT count(*) FROM audit u JOIN actions a ON a.client = u.client AND a.id = u.action_id
		  AND u.part_day = a.rows_day`, 12},
	} {
		if got := count(c.sql); got != c.want {
			t.Errorf("after the upgrade, %s: %d, want %d", c.sql, got, c.want)
		}
	}
	if dbtest.OnCitus() {
		// Distributed by client, with their partitions, co-located with events.
		if got := count(`SELECT count(*) FROM pg_dist_partition p
			WHERE p.logicalrelid IN ('attempts'::regclass, 'audit'::regclass, 'attempts_19700101'::regclass,
			                         'audit_19700101'::regclass)
			  AND p.colocationid = (SELECT colocationid FROM pg_dist_partition WHERE logicalrelid = 'events'::regclass)`); got != 4 {
			t.Errorf("%d of attempts, audit and their old partitions are distributed with events, want 4", got)
		}
	}

	r, err := retention.MoveOldRows(ctx, pool, true, nil)
	if err != nil {
		t.Fatalf("move the old rows: %v", err)
	}
	if r.Actions != 6 || !r.Dropped {
		t.Errorf("moved %d actions' rows (dropped the old days: %v), want 6 and dropped", r.Actions, r.Dropped)
	}
	today := partitions.Day(time.Now()).Format(time.DateOnly)
	for _, c := range []struct {
		sql  string
		want int
	}{
		{`SELECT count(*) FROM attempts WHERE part_day = '` + today + `'`, 12},
		{`SELECT count(*) FROM audit WHERE part_day = '` + today + `'`, 12},
		{`SELECT count(*) FROM actions WHERE rows_day = '` + today + `'`, 6},
		{`SELECT count(*) FROM pg_class WHERE relname IN ('attempts_19700101', 'audit_19700101')`, 0},
	} {
		if got := count(c.sql); got != c.want {
			t.Errorf("after the move, %s: %d, want %d", c.sql, got, c.want)
		}
	}
	// A new attempt goes on from the old ids.
	var action, id int64
	if err := pool.QueryRow(ctx, `SELECT id FROM actions WHERE client = 'acme' LIMIT 1`).Scan(&action); err != nil {
		t.Fatal(err)
	}
	if err := pool.QueryRow(ctx, `INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
		VALUES ('acme', $1, 'call', 'k', 'w', $2) RETURNING id`, action, today).Scan(&id); err != nil {
		t.Fatalf("a new attempt after the upgrade: %v", err)
	}
	if id <= int64(lastAttempt) {
		t.Errorf("a new attempt has id %d, not past the old release's last (%d)", id, lastAttempt)
	}
}
