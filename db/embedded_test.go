package db

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

func TestEmbeddedLifecycle(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(shortTempDir(t), "pg")
	first := startEmbedded(t, dir)
	if !first.Owned() {
		t.Fatal("first start: Owned() = false, want true")
	}
	mustExec(t, first.DSN("oncehook"), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (42)")

	t.Run("SecondStartReuses", func(t *testing.T) {
		second := startEmbedded(t, dir)
		if second.Owned() {
			t.Fatal("second start: Owned() = true, want false")
		}
		if got := mustQueryInt(t, second.DSN("oncehook"), "SELECT v FROM kept"); got != 42 {
			t.Fatalf("via second: v = %d, want 42", got)
		}
		if err := second.Stop(t.Context()); err != nil {
			t.Fatalf("second.Stop: %v", err)
		}
		// Stopping a borrowed server must leave it running for its owner.
		mustQueryInt(t, first.DSN("oncehook"), "SELECT 1")
	})

	t.Run("StopRemovesSocket", func(t *testing.T) {
		sock := filepath.Join(socketDirFor(dir), ".s.PGSQL.5432")
		if _, err := os.Stat(sock); err != nil {
			t.Fatalf("socket before Stop: %v", err)
		}
		if err := first.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		if _, err := os.Stat(sock); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("socket after Stop: err = %v, want not exist", err)
		}
		if err := first.Stop(t.Context()); err != nil {
			t.Fatalf("second Stop: %v", err)
		}
	})

	t.Run("RestartKeepsData", func(t *testing.T) {
		e := startEmbedded(t, dir)
		if !e.Owned() {
			t.Fatal("restart: Owned() = false, want true")
		}
		if got := mustQueryInt(t, e.DSN("oncehook"), "SELECT v FROM kept"); got != 42 {
			t.Fatalf("after restart: v = %d, want 42", got)
		}
		// A crash leaves postmaster.pid behind; simulate one with the pid of a
		// server that has since exited.
		pidFile := filepath.Join(dir, "postmaster.pid")
		stale, err := os.ReadFile(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(pidFile)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Stop(t.Context()); err != nil {
			t.Fatalf("Stop: %v", err)
		}
		// The pid is stale only once the old postmaster has fully exited (and been
		// reaped): it removes the file a moment before it goes.
		waitGone(t, stale)
		if err := os.WriteFile(pidFile, stale, 0o600); err != nil {
			t.Fatal(err)
		}
		// As root the file must still belong to the server's user, as a real one would.
		st := fi.Sys().(*syscall.Stat_t)
		if err := os.Chown(pidFile, int(st.Uid), int(st.Gid)); err != nil {
			t.Fatal(err)
		}
		again := startEmbedded(t, dir)
		if !again.Owned() {
			t.Fatal("start over stale pid file: Owned() = false, want true")
		}
		mustQueryInt(t, again.DSN("oncehook"), "SELECT v FROM kept")
	})
}

// Two commands launched together must share one server, whatever the path length.
func TestEmbeddedConcurrentStartLongPath(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(shortTempDir(t), strings.Repeat("d", 120), "pg")
	var wg sync.WaitGroup
	got := make([]*Embedded, 2)
	errs := make([]error, 2)
	for i := range got {
		wg.Go(func() {
			got[i], errs[i] = StartEmbedded(t.Context(), EmbeddedParams{Dir: dir})
		})
	}
	wg.Wait()
	for _, e := range got {
		if e != nil {
			t.Cleanup(func() { stopEmbedded(t, e) })
		}
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("start %d: %v", i, err)
		}
	}
	if got[0].Owned() == got[1].Owned() {
		t.Fatalf("Owned() = %v and %v, want exactly one owner", got[0].Owned(), got[1].Owned())
	}
	for _, e := range got {
		mustQueryInt(t, e.DSN("oncehook"), "SELECT 1")
	}
}

func TestEmbeddedNoBinaries(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(shortTempDir(t), "pg")
	for name, dirs := range map[string][]string{
		"EmptyDir":  {t.TempDir()},
		"NoSearch":  {},
		"Unrelated": {"/nonexistent/bin"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := StartEmbedded(t.Context(), EmbeddedParams{Dir: dir, BinDirs: dirs})
			want := "PostgreSQL not found: install PostgreSQL 14 or newer (initdb, pg_ctl) or set DATABASE_URL"
			if err == nil || err.Error() != want {
				t.Fatalf("err = %v, want %q", err, want)
			}
			if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("data dir created without PostgreSQL: stat err = %v", err)
			}
		})
	}
}

func TestEmbeddedTooOld(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	for _, name := range []string{"initdb", "pg_ctl", "postgres"} {
		script := "#!/bin/sh\necho '" + name + " (PostgreSQL) 13.9'\n"
		if err := os.WriteFile(filepath.Join(bin, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, err := StartEmbedded(t.Context(), EmbeddedParams{Dir: filepath.Join(shortTempDir(t), "pg"), BinDirs: []string{bin}})
	if err == nil || !strings.Contains(err.Error(), "PostgreSQL 13") || !strings.Contains(err.Error(), "install PostgreSQL 14 or newer") {
		t.Fatalf("err = %v, want PostgreSQL 13 refused", err)
	}
	if strings.Contains(err.Error(), "\n") {
		t.Fatalf("err = %q, want one line", err)
	}
}

// As root, a new cluster whose data directory the postgres user cannot reach (a
// checkout in root's 0700 home) goes under /var/lib/oncehook, found again by the
// next start, and the closed directory is left as it was.
func TestEmbeddedUnreachableDataDirKeptAside(t *testing.T) {
	t.Parallel()
	skipUnlessRoot(t)
	closed := shortTempDir(t)
	if err := os.Chmod(closed, 0o700); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(closed, "oncehook", ".oncehook", "pg")
	want, err := EmbeddedDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(want, spareRoot+"/") {
		t.Fatalf("EmbeddedDataDir = %s, want a directory under %s", want, spareRoot)
	}
	t.Cleanup(func() { os.RemoveAll(filepath.Dir(want)) })

	first := startEmbedded(t, dir)
	if first.Dir() != want {
		t.Fatalf("Dir() = %s, want %s", first.Dir(), want)
	}
	mustExec(t, first.DSN("oncehook"), "CREATE TABLE kept (v int); INSERT INTO kept VALUES (7)")
	second := startEmbedded(t, dir)
	if second.Owned() || second.Dir() != want {
		t.Fatalf("second start: Owned() = %v, Dir() = %s; want the first's server in %s", second.Owned(), second.Dir(), want)
	}
	if got := mustQueryInt(t, second.DSN("oncehook"), "SELECT v FROM kept"); got != 7 {
		t.Fatalf("via second: v = %d, want 7", got)
	}
	if got, err := EmbeddedDataDir(dir); err != nil || got != want {
		t.Fatalf("EmbeddedDataDir after start = %s, %v; want %s", got, err, want)
	}

	fi, err := os.Stat(closed)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: mode %04o, want 0700 as it was", closed, fi.Mode().Perm())
	}
	if _, err := os.Stat(filepath.Join(closed, "oncehook")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("something was created under %s: stat err = %v", closed, err)
	}
	note, err := os.ReadFile(filepath.Join(filepath.Dir(want), spareNote))
	if err != nil || strings.TrimSpace(string(note)) != dir {
		t.Errorf("%s = %q, %v; want %s", spareNote, note, err, dir)
	}
}

// A cluster stays where it was made: when the way to it closes later, the start
// fails and says why, rather than starting an empty one elsewhere.
func TestEmbeddedUnreachableCluster(t *testing.T) {
	t.Parallel()
	skipUnlessRoot(t)
	parent := shortTempDir(t)
	dir := filepath.Join(parent, "pg")
	if err := startEmbedded(t, dir).Stop(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(parent, 0o700); err != nil {
		t.Fatal(err)
	}
	_, err := StartEmbedded(t.Context(), EmbeddedParams{Dir: dir})
	if err == nil {
		t.Fatal("err = nil, want the postgres user refused")
	}
	for _, want := range []string{`"postgres"`, "cannot reach data directory " + dir, parent + " is not searchable"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err = %q, want it to contain %q", err, want)
		}
	}
}

func skipUnlessRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not running as root: only root runs Postgres as another user")
	}
	if _, err := user.Lookup("postgres"); err != nil {
		t.Skip("no postgres user")
	}
}

// waitGone polls until the process named on the first line of a postmaster.pid
// no longer exists.
func waitGone(t *testing.T, pidFile []byte) {
	t.Helper()
	pid, err := strconv.Atoi(strings.SplitN(string(pidFile), "\n", 2)[0])
	if err != nil {
		t.Fatalf("postmaster.pid: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("postmaster %d still exists after Stop", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// shortTempDir is a /tmp directory others can pass through: t.TempDir's paths are
// long and 0700, and as root Postgres runs as the postgres user.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "ohtest-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func startEmbedded(t *testing.T, dir string) *Embedded {
	t.Helper()
	e, err := StartEmbedded(t.Context(), EmbeddedParams{Dir: dir})
	if err != nil {
		t.Fatalf("StartEmbedded: %v", err)
	}
	t.Cleanup(func() { stopEmbedded(t, e) })
	return e
}

func stopEmbedded(t *testing.T, e *Embedded) {
	if err := e.Stop(context.Background()); err != nil {
		t.Errorf("Stop: %v", err)
	}
}

func mustExec(t *testing.T, dsn, sql string) {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(t.Context(), sql); err != nil {
		t.Fatalf("exec %q: %v", sql, err)
	}
}

func mustQueryInt(t *testing.T, dsn, sql string) int {
	t.Helper()
	conn, err := pgx.Connect(t.Context(), dsn)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	defer conn.Close(context.Background())
	var n int
	if err := conn.QueryRow(t.Context(), sql).Scan(&n); err != nil {
		t.Fatalf("query %q: %v", sql, err)
	}
	return n
}
