// Package dbtest gives every database test a fresh database cloned from a migrated
// template, on one Postgres server per test run.
//
// The server is ONCEHOOK_TEST_DATABASE_URL when set (the Makefile starts one and
// shares it between packages); otherwise the first New starts a private one for
// the test binary, which Main stops after the run.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/migrations"
)

// EnvURL names the variable that points every test package at one shared server.
const EnvURL = "ONCEHOOK_TEST_DATABASE_URL"

// templateLockKey serialises template creation between test binaries sharing a
// server; any fixed number works as long as nothing else uses it.
const templateLockKey = 0x6f6e6365686f6f6b // "oncehook"

// server is this test binary's database server, reached on first use so that a
// package (or a fuzz worker process) that never asks for a database starts none.
var server struct {
	mu       sync.Mutex
	inMain   bool
	dsn      string        // superuser DSN on a maintenance database
	admin    *pgxpool.Pool // creates and drops the per-test databases
	template string        // created and migrated
	err      error         // a failed setup, reported to every test rather than retried
	// On a local Citus cluster (EnvCitus): its nodes, and a pool on each worker
	// that creates and drops the per-test databases there too.
	citus       *db.Cluster
	workerAdmin []*pgxpool.Pool
}

// clusters are the servers this binary started, by the first (a Citus
// cluster's coordinator), each with its directory to remove once stopped.
// starting is held (shared) while one starts, so that stopAll on a signal waits
// for it instead of missing it.
var clusters struct {
	starting sync.RWMutex
	mu       sync.Mutex
	m        map[*db.Embedded]started
}

// started is what stopCluster stops: the servers, then removes their directory.
type started struct {
	nodes []*db.Embedded
	dir   string
}

// Main is called from a package's TestMain: it runs m, with a server for the run
// started on first use unless ONCEHOOK_TEST_DATABASE_URL names one, then stops
// what it started and exits with m's code.
func Main(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	// Our servers are in their own process group, so Ctrl-C reaches only us: stop
	// them before dying rather than leave them running. (A -timeout panic still
	// leaks them; nothing runs after it.)
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		<-sigs
		stopAll()
		os.Exit(1)
	}()
	defer stopAll()

	server.mu.Lock()
	server.inMain = true
	server.mu.Unlock()
	defer func() {
		server.mu.Lock()
		defer server.mu.Unlock()
		if server.admin != nil {
			server.admin.Close()
		}
		for _, p := range server.workerAdmin {
			p.Close()
		}
	}()
	return m.Run()
}

// setup connects to the server, starting one if need be, and makes the template;
// once per binary.
func setup(ctx context.Context) (admin *pgxpool.Pool, dsn, template string, err error) {
	server.mu.Lock()
	defer server.mu.Unlock()
	if !server.inMain {
		return nil, "", "", errors.New("no database server: call dbtest.Main(m) from TestMain")
	}
	if server.template == "" && server.err == nil {
		server.err = connect(ctx)
	}
	return server.admin, server.dsn, server.template, server.err
}

func connect(ctx context.Context) error {
	server.dsn = os.Getenv(EnvURL)
	if OnCitus() {
		c, err := startCitus(ctx)
		if err != nil {
			return err
		}
		server.citus, server.dsn = c, c.Coordinator.DSN("postgres")
		for _, w := range c.Workers {
			p, err := pgxpool.New(ctx, w.DSN("postgres"))
			if err != nil {
				return fmt.Errorf("connect to a worker: %w", err)
			}
			server.workerAdmin = append(server.workerAdmin, p)
		}
	} else if server.dsn == "" {
		e, err := startCluster(ctx)
		if err != nil {
			return err
		}
		server.dsn = e.DSN("postgres")
	}
	cfg, err := pgxpool.ParseConfig(server.dsn)
	if err != nil {
		return fmt.Errorf("parse %s: %w", EnvURL, err)
	}
	cfg.MaxConns = 4
	server.admin, err = pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	server.template, err = ensureTemplate(ctx, server.dsn)
	return err
}

// startCluster starts a private server under a short /tmp path: the unix socket
// path must stay under ~100 bytes and t.TempDir's can be long.
func startCluster(ctx context.Context) (*db.Embedded, error) {
	clusters.starting.RLock()
	defer clusters.starting.RUnlock()
	dir, err := clusterDir()
	if err != nil {
		return nil, err
	}
	e, err := db.StartEmbedded(ctx, db.EmbeddedParams{Dir: dir + "/pg"})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	register(dir, e)
	return e, nil
}

// clusterDir makes a new directory for a cluster's files under /tmp.
func clusterDir() (string, error) {
	dir, err := os.MkdirTemp("/tmp", "ohtest-")
	if err != nil {
		return "", fmt.Errorf("create cluster directory: %w", err)
	}
	// MkdirTemp makes it 0700; when we are root Postgres runs as another user
	// that must pass through it.
	if err := os.Chmod(dir, 0o755); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("create cluster directory: %w", err)
	}
	return dir, nil
}

// register records servers started under dir, for stopCluster(nodes[0]).
func register(dir string, nodes ...*db.Embedded) {
	clusters.mu.Lock()
	defer clusters.mu.Unlock()
	if clusters.m == nil {
		clusters.m = map[*db.Embedded]started{}
	}
	clusters.m[nodes[0]] = started{nodes: nodes, dir: dir}
}

// stopCluster stops the servers registered under e (a Citus cluster's
// coordinator stops its workers too) and removes their files; later calls do
// nothing.
func stopCluster(e *db.Embedded) error {
	clusters.mu.Lock()
	s, ok := clusters.m[e]
	delete(clusters.m, e)
	clusters.mu.Unlock()
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := (&db.Cluster{Coordinator: s.nodes[0], Workers: s.nodes[1:]}).Stop(ctx)
	os.RemoveAll(s.dir)
	return err
}

func stopAll() {
	clusters.starting.Lock()
	defer clusters.starting.Unlock()
	clusters.mu.Lock()
	var all []*db.Embedded
	for e := range clusters.m {
		all = append(all, e)
	}
	clusters.mu.Unlock()
	for _, e := range all {
		if err := stopCluster(e); err != nil {
			fmt.Fprintln(os.Stderr, "dbtest:", err)
		}
	}
}

// New returns a pool (at most 8 connections) on a fresh database cloned from the
// migrated template; the pool is closed and the database dropped at t.Cleanup.
func New(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, _ := NewDSN(t)
	return pool
}

// NewDSN is New but also returns the database's DSN, for code that opens its own
// connections (migrations, the command under test).
func NewDSN(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	admin, serverDSN, tmpl, err := setup(ctx)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	name := "t_" + randomHex(8)
	for _, a := range append(workerAdmins(), admin) { // on Citus, the workers' parts first
		if err := cloneDatabase(ctx, a, name, tmpl); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	dsn, err := withDBName(serverDSN, name)
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatalf("dbtest: parse dsn: %v", err)
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(func() {
		pool.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE ends connections the test leaked outside the pool.
		for _, a := range append([]*pgxpool.Pool{admin}, workerAdmins()...) { // the coordinator first
			if err := dropDatabase(ctx, a, name); err != nil {
				t.Errorf("dbtest: %v", err)
			}
		}
	})
	return pool, dsn
}

// Cluster starts a private server of its own for a test that stops and starts
// Postgres (say, to see a 503), and returns it with a DSN to its migrated
// "oncehook" database. The server is stopped and its files removed at t.Cleanup.
// On Citus (EnvCitus) it is the coordinator of a cluster of its own, whose
// workers are stopped with it at t.Cleanup.
func Cluster(t testing.TB) (*db.Embedded, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var e *db.Embedded
	var c *db.Cluster
	var err error
	if OnCitus() {
		if c, err = startCitus(ctx); err == nil {
			e = c.Coordinator
		}
	} else {
		e, err = startCluster(ctx)
	}
	if err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	t.Cleanup(func() {
		if err := stopCluster(e); err != nil {
			t.Errorf("dbtest: %v", err)
		}
	})
	if c != nil {
		rememberCluster(c)
		if err := c.CreateDatabase(ctx, "oncehook"); err != nil {
			t.Fatalf("dbtest: %v", err)
		}
	}
	dsn := e.DSN("oncehook")
	if err := db.Migrate(ctx, dsn); err != nil {
		t.Fatalf("dbtest: %v", err)
	}
	return e, dsn
}

// templateName changes whenever a migration file does, so a shared server never
// hands out a template built from older migrations.
func templateName() (string, error) {
	h := sha256.New()
	err := fs.WalkDir(migrations.FS, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(migrations.FS, path)
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
		h.Write(b)
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("hash migrations: %w", err)
	}
	return "oncehook_tmpl_" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ensureTemplate creates and migrates the template once per server. Test binaries
// run in parallel against a shared server, so the check and the creation happen
// under an advisory lock, on a connection of its own whose close releases it.
// A template is marked IS_TEMPLATE only once fully migrated; one without the mark
// is a leftover of a failed run and is rebuilt.
func ensureTemplate(ctx context.Context, serverDSN string) (string, error) {
	name, err := templateName()
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, serverDSN)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", int64(templateLockKey)); err != nil {
		return "", fmt.Errorf("lock template: %w", err)
	}
	var ready bool
	err = conn.QueryRow(ctx, "SELECT datistemplate FROM pg_database WHERE datname = $1", name).Scan(&ready)
	switch {
	case err == nil && ready:
		return name, nil
	case err != nil && !errors.Is(err, pgx.ErrNoRows):
		return "", fmt.Errorf("look up template: %w", err)
	}
	ident := pgx.Identifier{name}.Sanitize()
	// Called from connect, which holds server.mu: server's fields are read directly.
	for _, a := range append([]*pgxpool.Pool{server.admin}, server.workerAdmin...) { // a new slice
		if _, err := a.Exec(ctx, "DROP DATABASE IF EXISTS "+ident+" WITH (FORCE)"); err != nil {
			return "", fmt.Errorf("drop unfinished template: %w", err)
		}
	}
	if server.citus != nil {
		if err := server.citus.CreateDatabase(ctx, name); err != nil {
			return "", fmt.Errorf("create template: %w", err)
		}
	} else if _, err := conn.Exec(ctx, "CREATE DATABASE "+ident); err != nil {
		return "", fmt.Errorf("create template: %w", err)
	}
	dsn, err := withDBName(serverDSN, name)
	if err != nil {
		return "", err
	}
	if err := db.Migrate(ctx, dsn); err != nil {
		return "", fmt.Errorf("migrate template: %w", err)
	}
	// Cloning fails while anyone is connected to the template, so shut the door
	// and end the sessions Migrate's pool may still be closing (on Citus, on the
	// workers too).
	for _, a := range append(slices.Clone(server.workerAdmin), server.admin) {
		if err := sealTemplate(ctx, a, name); err != nil {
			return "", err
		}
	}
	return name, nil
}

// sealTemplate makes name a template no one is connected to, on admin's server.
func sealTemplate(ctx context.Context, admin *pgxpool.Pool, name string) error {
	ident := pgx.Identifier{name}.Sanitize()
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("seal template: %w", err)
	}
	if _, err := admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		return fmt.Errorf("seal template: %w", err)
	}
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident+" IS_TEMPLATE true"); err != nil {
		return fmt.Errorf("seal template: %w", err)
	}
	return nil
}

// workerAdmins are the pools on a local Citus cluster's workers; none on one server.
func workerAdmins() []*pgxpool.Pool {
	server.mu.Lock()
	defer server.mu.Unlock()
	return slices.Clone(server.workerAdmin)
}

// cloneDatabase creates name from tmpl, retrying while a session on the template
// (an exiting backend) makes Postgres refuse with object_in_use.
func cloneDatabase(ctx context.Context, admin *pgxpool.Pool, name, tmpl string) error {
	q := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize() + " TEMPLATE " + pgx.Identifier{tmpl}.Sanitize()
	wait := 50 * time.Millisecond
	for {
		_, err := admin.Exec(ctx, q)
		if err == nil {
			return nil
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use
			return fmt.Errorf("create database %s: %w", name, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("create database %s: %w", name, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// dropDatabase drops name, retrying while a session Postgres cannot end for it
// (on Citus, a maintenance daemon's, ended by the coordinator's own drop) makes
// it refuse with object_in_use.
func dropDatabase(ctx context.Context, admin *pgxpool.Pool, name string) error {
	q := "DROP DATABASE IF EXISTS " + pgx.Identifier{name}.Sanitize() + " WITH (FORCE)"
	wait := 50 * time.Millisecond
	for {
		_, err := admin.Exec(ctx, q)
		var pgErr *pgconn.PgError
		if err == nil || !errors.As(err, &pgErr) || pgErr.Code != "55006" { // object_in_use
			if err != nil {
				return fmt.Errorf("drop database %s: %w", name, err)
			}
			return nil
		}
		if strings.Contains(pgErr.Message, "prepared transactions") {
			// A process the test killed mid-commit left a Citus transaction
			// prepared on this node; the coordinator's recovery of it runs in the
			// database being dropped, so it never comes: it is rolled back here.
			if rerr := rollbackPrepared(ctx, admin, name); rerr != nil {
				return fmt.Errorf("drop database %s: %w (and rolling back its prepared transactions: %v)", name, err, rerr)
			}
			continue
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("drop database %s: %w", name, err)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// rollbackPrepared rolls back the transactions left prepared in database name
// of admin's server, from a connection to that database (as ROLLBACK PREPARED
// must be).
func rollbackPrepared(ctx context.Context, admin *pgxpool.Pool, name string) error {
	rows, err := admin.Query(ctx, "SELECT gid FROM pg_prepared_xacts WHERE database = $1", name)
	if err != nil {
		return err
	}
	gids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil || len(gids) == 0 {
		return err
	}
	dsn, err := withDBName(admin.Config().ConnString(), name)
	if err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	for _, gid := range gids {
		if _, err := conn.Exec(ctx, "ROLLBACK PREPARED "+quoteLiteral(gid)); err != nil {
			return err
		}
	}
	return nil
}

// quoteLiteral quotes s as an SQL string literal.
func quoteLiteral(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// withDBName returns dsn pointed at database name, in either DSN form.
func withDBName(dsn, name string) (string, error) {
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		u, err := url.Parse(dsn)
		if err != nil {
			return "", fmt.Errorf("parse dsn: %w", err)
		}
		u.Path = "/" + name
		u.RawPath = ""
		return u.String(), nil
	}
	// In keyword/value form a later setting overrides an earlier one.
	return dsn + " dbname=" + name, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b) // never fails since Go 1.24
	return hex.EncodeToString(b)
}
