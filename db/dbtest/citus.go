package dbtest

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
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
const CitusInstall = db.CitusInstall

// OnCitus reports whether the tests run on a local Citus cluster (EnvCitus).
func OnCitus() bool { return os.Getenv(EnvCitus) == "1" }

// citusWorkers is how many worker nodes a local cluster has.
const citusWorkers = 2

// citusSettings are the settings each node of a local cluster starts with, past
// what db.StartCitus sets: eight shards a table keep the test databases quick to
// create.
var citusSettings = []string{"citus.shard_count=8"}

// startCitus starts a coordinator and its workers (db.StartCitus) under a short
// /tmp path of their own, stopped with the coordinator by stopCluster.
func startCitus(ctx context.Context) (*db.Cluster, error) {
	clusters.starting.RLock()
	defer clusters.starting.RUnlock()
	dir, err := clusterDir()
	if err != nil {
		return nil, err
	}
	c, err := db.StartCitus(ctx, db.CitusParams{Dir: dir, Workers: citusWorkers, Settings: citusSettings})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	register(dir, c.Nodes()...)
	return c, nil
}

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
	cluster, admin := server.citus, server.admin
	server.mu.Unlock()
	if cluster == nil {
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
	for _, n := range cluster.Nodes() {
		if err := n.CreateDatabase(ctx, name); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	dsn := cluster.Coordinator.DSN(name)
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
		if err := cluster.CreateDatabase(ctx, name); err != nil {
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

// NewEmpty returns the DSN of a new database with no migration applied, for a
// test that migrates it step by step (an upgrade from an older release): on a
// local Citus cluster (EnvCitus) it is on every node, the extension created and
// the workers registered, as a cluster an operator set up. It is dropped (on
// every node) at t.Cleanup.
func NewEmpty(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin, serverDSN, _, err := setup(ctx)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	server.mu.Lock()
	cluster := server.citus
	server.mu.Unlock()
	name := "e_" + randomHex(8)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, a := range append([]*pgxpool.Pool{admin}, workerAdmins()...) { // the coordinator first
			if err := dropDatabase(ctx, a, name); err != nil {
				t.Errorf("dbtest: %v", err)
			}
		}
	})
	if cluster != nil {
		if err := cluster.CreateDatabase(ctx, name); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
		return cluster.Coordinator.DSN(name)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		t.Fatalf("dbtest: create database %s: %v", name, err)
	}
	dsn, err := withDBName(serverDSN, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return dsn
}
