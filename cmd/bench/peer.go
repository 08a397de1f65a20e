package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// The peer is River's way of doing oncehook's job (cmd/riverpeer, its own
// module, so oncehook's module never depends on River). The bench builds it,
// runs it as its own process on a fresh database of its Postgres, and measures it
// with the same load generator and sandbox CRM as a fresh oncehook beside it.

// buildPeer builds cmd/riverpeer with its own go.mod and go.sum.
func (b *bench) buildPeer(ctx context.Context) error {
	b.peerBin = filepath.Join(b.dir, "riverpeer")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", b.peerBin, ".")
	cmd.Dir = filepath.Join(b.o.repoRoot, "cmd", "riverpeer")
	cmd.Env = append(os.Environ(), "GOWORK=off") // its own module, never a workspace's
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build cmd/riverpeer: %w\n%s", err, out)
	}
	return nil
}

// contender is one system the comparison runs: how to start it on a database and
// how to read its progress there. Every query runs on the contender's database.
type contender struct {
	name string // as the table names it
	tag  string // in its events' ids, so no two systems share an id or a CRM idempotency key
	db   string // its fresh database
	hook string // the webhook path
	// start runs it on dsn, listening on addr.
	start func(ctx context.Context, dsn, addr string) (*child, error)

	storedIDs string // provider event ids stored whose id is LIKE $1
	stored    string // count of deliveries stored since $1
	toRoute   string // true while a stored delivery waits to be routed; "" when routing is part of the ack
	open      string // true while routed work is not finished
	done      string // count and last finish time of work finished since $1
	notDone   string // state, count of work not finished well, since $1
}

func (b *bench) oncehookContender() contender {
	return contender{
		name: "oncehook", tag: "vo", db: "vs_oncehook", hook: "/hooks/stripe-live",
		start: func(ctx context.Context, dsn, addr string) (*child, error) {
			config := filepath.Join(b.dir, "vs_oncehook.yaml")
			if err := os.WriteFile(config, []byte(benchConfig(addr, b.dest.url)), 0o644); err != nil {
				return nil, err
			}
			env := append(os.Environ(), "DATABASE_URL="+dsn)
			for k, v := range benchEnv {
				env = append(env, k+"="+v)
			}
			args := append([]string{"serve", "--config", config}, b.profileArgs("--cpuprofile", "oncehook")...)
			return b.startProcess(ctx, "vs_oncehook.log", b.bin, args, env, addr)
		},
		storedIDs: `SELECT source_event_id FROM events WHERE source_event_id LIKE $1`,
		stored:    `SELECT count(*) FROM events WHERE received_at >= $1`,
		toRoute:   `SELECT EXISTS (SELECT 1 FROM event_queue)`,
		open: `SELECT EXISTS (SELECT 1 FROM actions
			WHERE state IN ('pending', 'processing', 'retrying', 'held', 'uncertain'))`,
		done: `SELECT count(*), coalesce(max(updated_at), $1) FROM actions
			WHERE state = 'confirmed' AND created_at >= $1`,
		notDone: `SELECT state, count(*) FROM actions WHERE state <> 'confirmed' AND created_at >= $1 GROUP BY state`,
	}
}

func (b *bench) peerContender() contender {
	return contender{
		name: "peer", tag: "vp", db: "vs_riverpeer", hook: "/hooks/stripe",
		start: func(ctx context.Context, dsn, addr string) (*child, error) {
			env := append(os.Environ(), "STRIPE_WEBHOOK_SECRET="+stripeSecret, "CRM_TOKEN="+crmToken)
			// The pool oncehook serve opens; River's workers and fetch cooldown are
			// the peer's own lean defaults (100, 10 ms).
			args := []string{"-database-url", dsn, "-listen", addr, "-destination", b.dest.url, "-pool", "16"}
			args = append(args, b.profileArgs("-cpuprofile", "riverpeer")...)
			return b.startProcess(ctx, "vs_riverpeer.log", b.peerBin, args, env, addr)
		},
		storedIDs: `SELECT event_id FROM deliveries WHERE event_id LIKE $1`,
		stored:    `SELECT count(*) FROM deliveries WHERE received_at >= $1`,
		toRoute:   "", // the job is inserted in the transaction that stores the delivery
		open: `SELECT EXISTS (SELECT 1 FROM river_job
			WHERE state IN ('available', 'pending', 'retryable', 'running', 'scheduled'))`,
		done: `SELECT count(*), coalesce(max(finalized_at), $1) FROM river_job
			WHERE state = 'completed' AND created_at >= $1`,
		notDone: `SELECT state::text, count(*) FROM river_job WHERE state <> 'completed' AND created_at >= $1 GROUP BY state`,
	}
}

// profileArgs asks a process of the comparison for a CPU profile of its own, under
// -profiles, numbered by start: name-1.prof, name-2.prof, ...
func (b *bench) profileArgs(flag, name string) []string {
	if b.o.profiles == "" {
		return nil
	}
	n := b.profileStarts.Add(1)
	return []string{flag, filepath.Join(b.o.profiles, fmt.Sprintf("%s-%d.prof", name, n))}
}

// startProcess runs a server binary as its own process, logging to logName in the
// bench's directory, and waits until addr answers GET /readyz.
func (b *bench) startProcess(ctx context.Context, logName, bin string, args, env []string, addr string) (*child, error) {
	logf, err := os.Create(filepath.Join(b.dir, logName))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // Ctrl-C reaches the bench, which stops it
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", filepath.Base(bin), err)
	}
	c := &child{cmd: cmd, url: "http://" + addr, done: make(chan error, 1)}
	go func() { c.done <- cmd.Wait(); logf.Close() }()
	if err := waitReady(ctx, c.url, c.done); err != nil {
		c.stop()
		tail, _ := os.ReadFile(logf.Name())
		return nil, fmt.Errorf("%s: %w; its log:\n%s", filepath.Base(bin), err, lastLines(string(tail), 20))
	}
	return c, nil
}

// restartPostgres stops the bench's Postgres and starts it again: a freshly
// started cluster, its shared buffers empty (the kernel's page cache is left alone:
// the machine is shared).
func (b *bench) restartPostgres(ctx context.Context) error {
	b.pg.pool.Close()
	if err := b.pg.emb.Stop(ctx); err != nil {
		return fmt.Errorf("stop postgres: %w", err)
	}
	if err := b.pg.emb.Start(ctx); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	var err error
	b.pg.pool, err = openPool(ctx, b.pg.dsn)
	return err
}

// freshDatabase creates an empty database and returns its DSN; an older one of the
// same name is dropped first.
func (b *bench) freshDatabase(ctx context.Context, name string) (string, error) {
	id := pgx.Identifier{name}.Sanitize()
	if err := b.pg.exec(ctx, `DROP DATABASE IF EXISTS `+id+` WITH (FORCE)`); err != nil {
		return "", err
	}
	if err := b.pg.exec(ctx, `CREATE DATABASE `+id); err != nil {
		return "", err
	}
	return b.pg.emb.DSN(name), nil
}

func (b *bench) dropDatabase(ctx context.Context, name string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := b.pg.exec(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`); err != nil {
		b.t.note("drop database %s: %v", name, err)
	}
}
