package dbtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// EnvCitus, set to 1, runs the tests on a local Citus cluster instead of one
// server: a coordinator and two workers started from the machine's PostgreSQL
// with Citus preloaded. The tests connect to the coordinator only; each test
// database is created on every node, with the tables distributed by the
// migrations.
const EnvCitus = "ONCEHOOK_TEST_CITUS"

// CitusInstall is what a run on Citus says when the machine's PostgreSQL has no
// Citus: one line, how to install it.
const CitusInstall = "Citus is not installed in this machine's PostgreSQL: install it from Citus's own packages " +
	"(https://docs.citusdata.com/en/stable/installation/multi_node.html), or build it with ../shared/citus/build.sh"

// OnCitus reports whether the tests run on a local Citus cluster (EnvCitus).
func OnCitus() bool { return os.Getenv(EnvCitus) == "1" }

// citusWorkers is how many worker nodes a local cluster has.
const citusWorkers = 2

// citusSettings are the settings each node of a local cluster starts with. Eight
// shards a table keep the test databases quick to create; prepared transactions
// are Citus's two-phase commit across nodes.
var citusSettings = []string{"shared_preload_libraries=citus", "max_prepared_transactions=200", "citus.shard_count=8"}

// startCitus starts a coordinator and its workers, each a private server.
func startCitus(ctx context.Context) (coordinator *db.Embedded, workers []*db.Embedded, err error) {
	coordinator, err = startNode(ctx)
	if err != nil {
		return nil, nil, err
	}
	for range citusWorkers {
		w, err := startNode(ctx)
		if err != nil {
			_ = stopCluster(coordinator)
			for _, w := range workers {
				_ = stopCluster(w)
			}
			return nil, nil, err
		}
		workers = append(workers, w)
	}
	return coordinator, workers, nil
}

// startNode starts one server of a local Citus cluster.
func startNode(ctx context.Context) (*db.Embedded, error) {
	e, err := startClusterWith(ctx, citusSettings)
	if err != nil && strings.Contains(err.Error(), `could not access file "citus"`) {
		return nil, errors.New(CitusInstall)
	}
	return e, err
}

// citusDatabase makes the database name on the coordinator a Citus database
// whose workers are workers: the database and the extension on each worker,
// then the extension on the coordinator and the nodes registered with it. A
// database that exists already is used.
func citusDatabase(ctx context.Context, coordinator *db.Embedded, workers []*db.Embedded, name string) error {
	for _, w := range workers {
		if err := createDatabase(ctx, w.DSN("postgres"), name); err != nil {
			return err
		}
		if err := execOn(ctx, w.DSN(name), "CREATE EXTENSION IF NOT EXISTS citus"); err != nil {
			return err
		}
	}
	if err := createDatabase(ctx, coordinator.DSN("postgres"), name); err != nil {
		return err
	}
	stmts := []string{"CREATE EXTENSION IF NOT EXISTS citus"}
	dir, port := coordinator.Socket()
	stmts = append(stmts, fmt.Sprintf("SELECT citus_set_coordinator_host(%s, %d)", quote(dir), port))
	for _, w := range workers {
		dir, port := w.Socket()
		stmts = append(stmts, fmt.Sprintf("SELECT citus_add_node(%s, %d)", quote(dir), port))
	}
	return execOn(ctx, coordinator.DSN(name), stmts...)
}

// createDatabase creates name on the server at dsn unless it exists.
func createDatabase(ctx context.Context, dsn, name string) error {
	err := execOn(ctx, dsn, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42P04" { // duplicate_database
		return nil
	}
	return err
}

// execOn runs stmts in turn on a connection of its own to dsn.
func execOn(ctx context.Context, dsn string, stmts ...string) error {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, s := range stmts {
		if _, err := conn.Exec(ctx, s); err != nil {
			return fmt.Errorf("%s: %w", s, err)
		}
	}
	return nil
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// NewUndistributed returns a pool on a new database of the local Citus cluster
// (EnvCitus) migrated before the citus extension was created in it, as a single
// Postgres, and a function that then creates the extension on every node and
// registers the workers: what a user does before oncehook citus distribute. The
// database is dropped on every node at t.Cleanup.
func NewUndistributed(t testing.TB) (*pgxpool.Pool, func()) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, _, _, err := setup(ctx); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	server.mu.Lock()
	coordinator, workers, admin := server.coordinator, server.workers, server.admin
	server.mu.Unlock()
	if coordinator == nil {
		t.Fatalf("dbtest: NewUndistributed needs the local Citus cluster (%s=1)", EnvCitus)
	}
	name := "u_" + randomHex(8)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, a := range append([]*pgxpool.Pool{admin}, workerAdmins()...) {
			if err := dropDatabase(ctx, a, name); err != nil {
				t.Errorf("dbtest: %v", err)
			}
		}
	})
	for _, n := range append([]*db.Embedded{coordinator}, workers...) {
		if err := createDatabase(ctx, n.DSN("postgres"), name); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	dsn := coordinator.DSN(name)
	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool, func() {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := citusDatabase(ctx, coordinator, workers, name); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
}

// SinglePostgresOnly ends t on a Citus cluster, saying why it holds on a single
// Postgres only (it reads a single-Postgres plan, the coordinator's locks or its
// storage); on a single Postgres it does nothing, so the test always runs there.
func SinglePostgresOnly(t testing.TB, why string) {
	t.Helper()
	if OnCitus() {
		t.Skip("single Postgres only: " + why)
	}
}
