package db

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

const (
	// embeddedPort only names the socket file: the server listens on no TCP port.
	embeddedPort = 5432
	// startWait covers crash recovery after an unclean stop, not just a cold start.
	startWait = 120 * time.Second
	stopWait  = 60 * time.Second
	// maxLogSize is where server.log is rotated once, so a long-lived data
	// directory does not grow without bound.
	maxLogSize = 10 << 20
)

// EmbeddedParams configures StartEmbedded.
type EmbeddedParams struct {
	Dir    string       // data directory, e.g. ".oncehook/pg"
	Logger *slog.Logger // may be nil
	// BinDirs, when non-nil, replaces the search for the PostgreSQL binaries
	// (PATH, then /usr/lib/postgresql/*/bin and similar, highest version first).
	BinDirs []string
	// Settings are more server settings, name=value, passed at every start (a
	// local Citus cluster's shared_preload_libraries, say).
	Settings []string
}

// Embedded is a private PostgreSQL server under a data directory, reachable only
// over a unix socket in a 0700 directory.
type Embedded struct {
	dir      string // absolute
	bin      pgBin
	user     *runAs
	logger   *slog.Logger
	settings []string

	mu      sync.Mutex
	sockDir string
	port    int
	owned   bool
}

// StartEmbedded starts (or reuses) a private PostgreSQL under p.Dir and returns
// once it accepts connections, with the database "oncehook" created. If a server
// already runs on p.Dir (another oncehook command started it), it is used and
// Owned reports false. As root, Postgres runs as the "postgres" user, and a new
// cluster whose data directory that user cannot reach is kept under
// /var/lib/oncehook instead (see EmbeddedDataDir and Dir). Errors: PostgreSQL
// missing or older than 14, an existing cluster the server's user cannot reach,
// or initdb or the start failing (the error then carries the end of the server log).
func StartEmbedded(ctx context.Context, p EmbeddedParams) (*Embedded, error) {
	if p.Dir == "" {
		return nil, errors.New("embedded postgres: no data directory")
	}
	dir, err := filepath.Abs(p.Dir)
	if err != nil {
		return nil, fmt.Errorf("embedded postgres: %w", err)
	}
	logger := p.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	requested := dir
	dir, user, closed, placeErr := placeDataDir(requested)
	if placeErr != nil {
		dir = requested
	}
	// Look for binaries before creating anything, so a machine without
	// PostgreSQL is told so and left untouched (and told that first: before
	// PostgreSQL is installed there is no "postgres" user either).
	dataMajor, err := readPGVersion(dir)
	if err != nil {
		return nil, err
	}
	bin, err := findBinaries(ctx, p.BinDirs, dataMajor)
	if err != nil {
		return nil, err
	}
	if placeErr != nil {
		return nil, placeErr
	}
	if dataMajor > 0 && dataMajor != bin.major {
		return nil, fmt.Errorf("data directory %s holds PostgreSQL %d data but PostgreSQL %d was found: install PostgreSQL %d, move the directory away to start afresh, or set DATABASE_URL",
			dir, dataMajor, bin.major, dataMajor)
	}
	if dir != requested {
		if err := useSpareDir(logger, dir, requested, user, closed); err != nil {
			return nil, err
		}
	}
	if err := prepareDataDir(dir, user); err != nil {
		return nil, err
	}
	e := &Embedded{dir: dir, bin: bin, user: user, logger: logger, settings: p.Settings,
		sockDir: socketDirFor(dir), port: embeddedPort}
	if err := e.Start(ctx); err != nil {
		return nil, err
	}
	if err := e.CreateDatabase(ctx, "oncehook"); err != nil {
		if e.Owned() {
			_ = e.Stop(context.WithoutCancel(ctx))
		}
		return nil, err
	}
	return e, nil
}

// useSpareDir prepares dir, under spareRoot, for a cluster asked for at requested,
// and says why it lives there: the server's user cannot enter closed, or it was made
// there.
func useSpareDir(logger *slog.Logger, dir, requested string, user *runAs, closed string) error {
	if err := prepareSpareDir(dir, requested); err != nil {
		return err
	}
	why := "where it was made"
	if closed != "" {
		why = fmt.Sprintf("because user %s cannot enter %s", user.name, closed)
	}
	logger.Info("embedded postgres data kept under "+spareRoot+", "+why, "data_dir", requested, "dir", dir)
	return nil
}

// Dir returns the directory the cluster lives in: EmbeddedParams.Dir made
// absolute, or the directory EmbeddedDataDir names in its place.
func (e *Embedded) Dir() string { return e.dir }

// DSN returns a pgx connection string for dbname over the server's unix socket.
func (e *Embedded) DSN(dbname string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable",
		dsnQuote(e.sockDir), e.port, dsnQuote(dbname))
}

// Socket returns the directory of the server's unix socket and the port that
// names it: what another server (a Citus coordinator) connects to it by.
func (e *Embedded) Socket() (dir string, port int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.sockDir, e.port
}

// Owned reports whether this process started the server and so must stop it.
func (e *Embedded) Owned() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.owned
}

// Start starts the server again after Stop (tests use it to bring storage back)
// and makes this process its owner. If a server already runs on the directory,
// it is used as it is.
func (e *Embedded) Start(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	unlock, err := lockDir(ctx, e.dir)
	if err != nil {
		return err
	}
	defer unlock()
	// Ownership is left as it was: a server we started stays ours to stop.
	if e.reuse(ctx) {
		e.logger.Debug("embedded postgres already running", "dir", e.dir, "socket", e.sockDir)
		return nil
	}
	if _, err := os.Stat(filepath.Join(e.dir, "PG_VERSION")); errors.Is(err, fs.ErrNotExist) {
		if err := e.initdb(ctx); err != nil {
			return err
		}
	}
	if err := e.start(ctx); err != nil {
		return err
	}
	e.owned = true
	return nil
}

// Stop stops the server with a fast shutdown (sessions are ended, data is
// flushed) if this process started it, and waits for it to exit; otherwise it
// does nothing. Stopping a server that is already down is not an error.
func (e *Embedded) Stop(ctx context.Context) error {
	return e.stop(ctx, "fast")
}

// StopImmediate stops the server the way a power cut would: `pg_ctl -m immediate`
// ends every process without a checkpoint, so the next Start runs crash recovery
// from the WAL. Fault tests use it to prove that what was committed survives. Like
// Stop, it does nothing unless this process started the server.
func (e *Embedded) StopImmediate(ctx context.Context) error {
	return e.stop(ctx, "immediate")
}

func (e *Embedded) stop(ctx context.Context, mode string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.owned {
		return nil
	}
	unlock, err := lockDir(ctx, e.dir)
	if err != nil {
		return err
	}
	defer unlock()
	ctx, cancel := context.WithTimeout(ctx, stopWait+10*time.Second)
	defer cancel()
	out, err := e.command(ctx, "pg_ctl", "stop", "-w", "-t", secs(stopWait), "-m", mode, "-D", e.dir).CombinedOutput()
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(e.dir, "postmaster.pid")); !errors.Is(statErr, fs.ErrNotExist) {
			return fmt.Errorf("stop postgres (%s): %w: %s", mode, err, strings.TrimSpace(string(out)))
		}
	}
	e.owned = false
	// Empty once the server has removed its socket; left alone otherwise.
	_ = os.Remove(e.sockDir)
	return nil
}

// reuse reports whether a server is already up on the data directory, and if so
// points e at the socket it advertises in postmaster.pid.
func (e *Embedded) reuse(ctx context.Context) bool {
	b, err := os.ReadFile(filepath.Join(e.dir, "postmaster.pid"))
	if err != nil {
		return false
	}
	// Lines: pid, data dir, start time, port, first socket directory, ...
	lines := strings.Split(string(b), "\n")
	if len(lines) < 5 {
		return false
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	sock := strings.TrimSpace(lines[4])
	if err != nil || sock == "" {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	dsn := fmt.Sprintf("host=%s port=%d user=postgres dbname=postgres sslmode=disable", dsnQuote(sock), port)
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false // stale pid file, or a server not ready: pg_ctl start sorts it out
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if conn.Ping(ctx) != nil {
		return false
	}
	e.sockDir, e.port = sock, port
	return true
}

func (e *Embedded) initdb(ctx context.Context) error {
	e.logger.Info("creating embedded postgres data directory", "dir", e.dir, "postgres", e.bin.dir)
	// Trust is safe only because the server listens on nothing but a socket in a
	// 0700 directory; TCP is rejected outright should someone enable it.
	out, err := e.command(ctx, "initdb", "-D", e.dir, "-U", "postgres",
		"--auth-local=trust", "--auth-host=reject", "-E", "UTF8", "--locale=C", "--no-instructions").CombinedOutput()
	if err != nil {
		return fmt.Errorf("initdb: %w: %s", err, lastLines(out, 20))
	}
	return nil
}

func (e *Embedded) start(ctx context.Context) error {
	e.sockDir, e.port = socketDirFor(e.dir), embeddedPort
	if err := ensureSocketDir(e.sockDir, e.user); err != nil {
		return err
	}
	logPath := filepath.Join(e.dir, "server.log")
	if fi, err := os.Stat(logPath); err == nil && fi.Size() > maxLogSize {
		_ = os.Rename(logPath, logPath+".1")
	}
	// Passed at every start rather than written to postgresql.conf, so no TCP
	// listener can appear even if a config edit is lost. fsync stays on.
	opts := fmt.Sprintf("-c listen_addresses='' -k '%s' -p %d -c max_connections=200", e.sockDir, e.port)
	for _, s := range e.settings {
		opts += " -c '" + strings.ReplaceAll(s, "'", "") + "'"
	}
	ctx, cancel := context.WithTimeout(ctx, startWait+10*time.Second)
	defer cancel()
	e.logger.Debug("starting embedded postgres", "dir", e.dir, "socket", e.sockDir)
	out, err := e.command(ctx, "pg_ctl", "start", "-w", "-t", secs(startWait),
		"-D", e.dir, "-l", logPath, "-o", opts).CombinedOutput()
	if err != nil {
		tail, _ := os.ReadFile(logPath)
		return fmt.Errorf("start postgres: %w: %s\nlast lines of %s:\n%s",
			err, strings.TrimSpace(string(out)), logPath, lastLines(tail, 20))
	}
	return nil
}

// CreateDatabase creates the database name on the server unless it exists.
func (e *Embedded) CreateDatabase(ctx context.Context, name string) error {
	conn, err := pgx.Connect(ctx, e.DSN("postgres"))
	if err != nil {
		return fmt.Errorf("connect to embedded postgres: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize())
	// A concurrent CREATE of the same name fails on the catalog's unique index
	// rather than with duplicate_database; either way the database is there.
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "42P04" || pgErr.Code == "23505") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("create database %s: %w", name, err)
	}
	return nil
}

// command runs a PostgreSQL binary as the server's user, in its own process group
// so the terminal's Ctrl-C reaches oncehook alone and oncehook stops the server
// last. It runs from "/" because the caller's directory may be closed to that user.
func (e *Embedded) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, e.bin.path(name), args...)
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: e.user.credential()}
	cmd.WaitDelay = 5 * time.Second
	return cmd
}

func readPGVersion(dir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(dir, "PG_VERSION"))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read data directory: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", filepath.Join(dir, "PG_VERSION"), err)
	}
	return n, nil
}

func secs(d time.Duration) string { return strconv.Itoa(int(d.Seconds())) }

func lastLines(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.TrimSpace(strings.Join(lines, "\n"))
}

// dsnQuote quotes a keyword/value connection-string value when it needs it.
func dsnQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, ` '\`) {
		return s
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
