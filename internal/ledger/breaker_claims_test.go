package ledger_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// analyzer stands in for the database under sqlc's methods: it runs each
// statement under EXPLAIN (ANALYZE, BUFFERS) in a savepoint it rolls back, and
// keeps the blocks it read and the rows its plan returned.
type analyzer struct {
	t      *testing.T
	tx     pgx.Tx
	blocks int64
	rows   float64
}

func (a *analyzer) analyze(ctx context.Context, sql string, args []any) {
	a.t.Helper()
	sp, err := a.tx.Begin(ctx)
	if err != nil {
		a.t.Fatal(err)
	}
	defer sp.Rollback(ctx) //nolint:errcheck // only looked into
	var out []byte
	if err := sp.QueryRow(ctx, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) "+sql, args...).Scan(&out); err != nil {
		a.t.Fatal(err)
	}
	var plans []struct {
		Plan struct {
			ActualRows float64 `json:"Actual Rows"`
			Hit        int64   `json:"Shared Hit Blocks"`
			Read       int64   `json:"Shared Read Blocks"`
		} `json:"Plan"`
	}
	if err := json.Unmarshal(out, &plans); err != nil {
		a.t.Fatal(err)
	}
	a.blocks, a.rows = plans[0].Plan.Hit+plans[0].Plan.Read, plans[0].Plan.ActualRows
}

func (a *analyzer) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	a.analyze(ctx, sql, args)
	return pgconn.CommandTag{}, nil
}

func (a *analyzer) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	a.analyze(ctx, sql, args)
	return a.tx.Query(ctx, "SELECT WHERE false")
}

func (a *analyzer) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	a.analyze(ctx, sql, args)
	return a.tx.QueryRow(ctx, "SELECT WHERE false")
}

func (a *analyzer) CopyFrom(context.Context, pgx.Identifier, []string, pgx.CopyFromSource) (int64, error) {
	a.t.Fatal("no copy expected")
	return 0, nil
}

func (a *analyzer) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	a.t.Fatal("no batch expected")
	return nil
}

// TestParkedActionsCostOtherClaimsNothing: while a destination's breaker is
// open, 100,000 of its due actions, once parked, cost the claim of another
// destination's work about what it costs without them (until autovacuum, a
// block of index a few hundred old entries); left due (unparked, only skipped
// by the claim's filter), each claim would read them all.
func TestParkedActionsCostOtherClaimsNothing(t *testing.T) {
	t.Parallel()
	if dbtest.OnCitus() {
		t.Skip("the blocks a claim reads are the single Postgres's plan; Citus's claims read one shard, by client")
	}
	pool := dbtest.New(t)
	ctx := context.Background()
	q := db.New(pool)
	fill := func(from, to int, dest string, dueFor time.Duration) {
		t.Helper()
		if _, err := pool.Exec(ctx, `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key, destination,
    params, params_sha256, state, max_attempts, give_up_at, next_attempt_at)
SELECT 'acme', 'live', 's', 'n', 'enq_' || i, '[]', 'op_' || i, $3, '{}', '\x00', 'pending', 8,
       now() + interval '1 day', now() - make_interval(secs => $4)
FROM generate_series($1::int, $2::int) AS i`, from, to, dest, dueFor.Seconds()); err != nil {
			t.Fatal(err)
		}
	}
	claimBlocks := func() (int64, float64) {
		t.Helper()
		if _, err := pool.Exec(ctx, `ANALYZE actions`); err != nil {
			t.Fatal(err)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx) //nolint:errcheck // only looked into
		a := &analyzer{t: t, tx: tx}
		_, _ = db.New(a).ActionClaim(ctx, db.ActionClaimParams{Client: "acme", MaxActions: 16, Worker: "w",
			LeaseSeconds: 30, Callable: []string{"crm", "mail"}, FillNames: []string{},
			OnlyDestinations: []string{}, SkipDestinations: []string{}})
		return a.blocks, a.rows
	}
	fill(1, 5, "mail", time.Minute)
	alone, rows := claimBlocks()
	if rows != 5 {
		t.Fatalf("the claim of mail's 5 actions returned %v rows", rows)
	}
	fill(6, 100005, "crm", time.Hour) // due before mail's: first in the claim's order
	if ok, err := ledger.OpenBreaker(ctx, pool, "crm", "503", settings.BreakerSettings{}, ledger.AlertPlan{}); !ok || err != nil {
		t.Fatalf("open: %v %v", ok, err)
	}
	unparked, rows := claimBlocks()
	if rows != 5 {
		t.Fatalf("with crm's breaker open the claim returned %v rows, want mail's 5", rows)
	}
	if n, err := q.ActionPark(ctx, db.ActionParkParams{Client: "acme", Destination: "crm", Until: time.Now().Add(time.Hour)}); err != nil || n != 100000 {
		t.Fatalf("parked %d: %v", n, err)
	}
	claimBlocks() // the first scan after the park marks the rows' old index entries dead
	parked, rows := claimBlocks()
	if rows != 5 {
		t.Fatalf("with crm's actions parked the claim returned %v rows, want mail's 5", rows)
	}
	// Autovacuum then removes the parked rows' old index entries.
	if _, err := pool.Exec(ctx, `VACUUM actions`); err != nil {
		t.Fatal(err)
	}
	vacuumed, rows := claimBlocks()
	if rows != 5 {
		t.Fatalf("after a vacuum the claim returned %v rows, want mail's 5", rows)
	}
	t.Logf("blocks a claim of 5 actions reads: alone %d; beside 100,000 due actions of an open breaker %d; "+
		"beside them parked %d (their old index entries not yet vacuumed), %d once vacuumed", alone, unparked, parked, vacuumed)
	if vacuumed > 2*alone+20 {
		t.Errorf("the claim beside 100,000 parked actions read %d blocks once vacuumed, alone %d", vacuumed, alone)
	}
	if parked > alone+100000/100 {
		t.Errorf("the claim beside 100,000 freshly parked actions read %d blocks, alone %d: more than a block a hundred", parked, alone)
	}
	if unparked < 50*parked {
		t.Errorf("the claim beside 100,000 unparked actions read %d blocks, parked %d: the test no longer tells them apart", unparked, parked)
	}
}
