package dbtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

func TestNewIsolated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a := dbtest.New(t)
	b, dsnB := dbtest.NewDSN(t)

	if _, err := a.Exec(ctx, "CREATE TABLE only_in_a (v int)"); err != nil {
		t.Fatal(err)
	}
	if name(t, a) == name(t, b) {
		t.Fatalf("both pools on database %s", name(t, a))
	}
	if exists(t, b, "only_in_a") {
		t.Fatal("table created in a is visible in b")
	}
	// Both come from the migrated template (goose's bookkeeping table proves the
	// migrations ran there, whatever they contain).
	for _, p := range []*pgxpool.Pool{a, b} {
		if !exists(t, p, "goose_db_version") {
			t.Fatalf("database %s is not migrated", name(t, p))
		}
	}
	// The DSN reaches the same database as the pool.
	conn, err := pgx.Connect(ctx, dsnB)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var got string
	if err := conn.QueryRow(ctx, "SELECT current_database()").Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := name(t, b); got != want {
		t.Fatalf("DSN database = %s, want %s", got, want)
	}
}

// Many tests asking at once share one template and each get their own database.
func TestNewConcurrent(t *testing.T) {
	t.Parallel()
	for i := range 8 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			p := dbtest.New(t)
			if _, err := p.Exec(t.Context(), "CREATE TABLE mine (v int)"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestClusterStopStart(t *testing.T) {
	t.Parallel()
	e, dsn := dbtest.Cluster(t)
	ctx := t.Context()
	ping := func() error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer conn.Close(context.Background())
		return conn.Ping(ctx)
	}
	if err := ping(); err != nil {
		t.Fatalf("before Stop: %v", err)
	}
	if err := e.Stop(ctx); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if err := ping(); err == nil {
		t.Fatal("after Stop: ping succeeded")
	}
	if err := e.Start(ctx); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := ping(); err != nil {
		t.Fatalf("after Start: %v", err)
	}
}

func name(t *testing.T, p *pgxpool.Pool) string {
	t.Helper()
	var s string
	if err := p.QueryRow(t.Context(), "SELECT current_database()").Scan(&s); err != nil {
		t.Fatal(err)
	}
	return s
}

func exists(t *testing.T, p *pgxpool.Pool, table string) bool {
	t.Helper()
	var ok bool
	if err := p.QueryRow(t.Context(), "SELECT to_regclass($1) IS NOT NULL", table).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	return ok
}
