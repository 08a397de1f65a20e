package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
)

// postgres is the bench's own server: embedded, durable (fsync and
// synchronous_commit on, the defaults), under a temporary directory.
type postgres struct {
	emb  *db.Embedded
	dir  string
	dsn  string
	pool *pgxpool.Pool // the bench's own connections: setup and polling
	// On a local Citus cluster, emb is the coordinator and these its workers.
	workers []*db.Embedded
}

func startPostgres(ctx context.Context, dir string) (*postgres, error) {
	log.Printf("starting postgres in %s", dir)
	emb, err := db.StartEmbedded(ctx, db.EmbeddedParams{Dir: dir})
	if err != nil {
		return nil, err
	}
	return migrated(ctx, &postgres{emb: emb, dir: dir, dsn: emb.DSN("oncehook")})
}

// migrated migrates pg's database and opens the bench's pool on it; on error it
// stops pg's server.
func migrated(ctx context.Context, pg *postgres) (*postgres, error) {
	if err := db.Migrate(ctx, pg.dsn); err != nil {
		pg.stop()
		return nil, err
	}
	var err error
	if pg.pool, err = openPool(ctx, pg.dsn); err != nil {
		pg.stop()
		return nil, err
	}
	return pg, nil
}

// openPool is the bench's own small pool: setup, polling, counting.
func openPool(ctx context.Context, dsn string) (*pgxpool.Pool, error) { return db.Open(ctx, dsn, 8) }

func (pg *postgres) stop() {
	if pg.pool != nil {
		pg.pool.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := (&db.Cluster{Coordinator: pg.emb, Workers: pg.workers}).Stop(ctx); err != nil {
		log.Printf("stop postgres: %v", err)
	}
}

// postmasterPID is the server's main process, parent of every backend.
func (pg *postgres) postmasterPID() int { return postmasterPID(pg.dir) }

// workerPIDs are the postmasters of a cluster's workers, none on one server.
func (pg *postgres) workerPIDs() []func() int {
	var out []func() int
	for _, w := range pg.workers {
		out = append(out, func() int { return postmasterPID(w.Dir()) })
	}
	return out
}

// checkpoint writes out every dirty page, on each node of a cluster.
func (pg *postgres) checkpoint(ctx context.Context) error {
	if err := pg.exec(ctx, `CHECKPOINT`); err != nil {
		return err
	}
	if len(pg.workers) > 0 {
		return pg.exec(ctx, `SELECT run_command_on_workers('CHECKPOINT')`)
	}
	return nil
}

// postmasterPID is the main process of the server whose data directory is dir.
func postmasterPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "postmaster.pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.SplitN(string(b), "\n", 2)[0])
	return pid
}

// socket returns the directory and port of the server's unix socket, for pgbench.
func (pg *postgres) socket() (dir string, port string) {
	cfg, err := pgx.ParseConfig(pg.dsn)
	if err != nil {
		return "", ""
	}
	return cfg.Host, strconv.Itoa(int(cfg.Port))
}

func (pg *postgres) exec(ctx context.Context, sql string, args ...any) error {
	_, err := pg.pool.Exec(ctx, sql, args...)
	return err
}

func (pg *postgres) count(ctx context.Context, sql string, args ...any) (int64, error) {
	var n int64
	err := pg.pool.QueryRow(ctx, sql, args...).Scan(&n)
	return n, err
}

// commits is how many transactions the bench database has committed so far.
func (pg *postgres) commits(ctx context.Context) int64 {
	n, _ := pg.count(ctx, `SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()`)
	return n
}

// eventUpdates is how many rows of events were updated so far, and how many of
// those updates were HOT (the new version on the same page, no index entry written).
func (pg *postgres) eventUpdates(ctx context.Context) (updates, hot int64) {
	_ = pg.pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
		WHERE relname = 'events'`).Scan(&updates, &hot)
	return updates, hot
}

// baselineTable holds the plain inserts: a unique text key and a ~2 KB body, as an
// inbox row has, without oncehook's other columns and indexes.
const baselineTable = `CREATE TABLE IF NOT EXISTS bench_baseline (
    id   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    k    text  NOT NULL UNIQUE,
    body bytea NOT NULL)`

// baseline measures single-row durable INSERTs per second at clients connections:
// pgbench when it is installed, otherwise the same statement in a pgx loop.
func (pg *postgres) baseline(ctx context.Context, clients int, d time.Duration) (float64, string, error) {
	if err := pg.exec(ctx, `DROP TABLE IF EXISTS bench_baseline`); err != nil {
		return 0, "", err
	}
	if err := pg.exec(ctx, baselineTable); err != nil {
		return 0, "", err
	}
	defer pg.exec(context.WithoutCancel(ctx), `DROP TABLE IF EXISTS bench_baseline`) //nolint:errcheck
	if path, err := exec.LookPath("pgbench"); err == nil {
		tps, err := pg.pgbench(ctx, path, clients, d)
		return tps, "pgbench", err
	}
	tps, err := pg.insertLoop(ctx, clients, d)
	return tps, "pgx loop", err
}

var tpsLine = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)

func (pg *postgres) pgbench(ctx context.Context, path string, clients int, d time.Duration) (float64, error) {
	script := filepath.Join(filepath.Dir(pg.dir), "baseline.sql")
	// A random 63-bit key per insert; pgbench has no sequence of its own. The body
	// goes as a parameter (-D), as oncehook sends it.
	sql := "\\set k random(1, 9223372036854775806)\n" +
		"INSERT INTO bench_baseline (k, body) VALUES ('evt_' || :client_id || '_' || :k, convert_to(:body, 'UTF8'));\n"
	if err := os.WriteFile(script, []byte(sql), 0o644); err != nil {
		return 0, err
	}
	host, port := pg.socket()
	cmd := exec.CommandContext(ctx, path, "-n", "-M", "prepared", "-c", strconv.Itoa(clients), "-j", "2",
		"-T", strconv.Itoa(int(d.Seconds())), "-f", script,
		"-D", "body="+string(eventBody("evt_baseline", "enq_baseline", typeIgnored)), "-h", host, "-p", port, "-U", "postgres", "oncehook")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("pgbench: %w: %s", err, out)
	}
	m := tpsLine.FindSubmatch(out)
	if m == nil {
		return 0, fmt.Errorf("pgbench printed no tps: %s", out)
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

func (pg *postgres) insertLoop(ctx context.Context, clients int, d time.Duration) (float64, error) {
	body := eventBody("evt_baseline", "enq_baseline", "invoice.paid")
	var n atomic.Int64
	var wg sync.WaitGroup
	errc := make(chan error, clients)
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	start := time.Now()
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgx.Connect(ctx, pg.dsn)
			if err != nil {
				errc <- err
				return
			}
			defer conn.Close(context.Background())
			for i := 0; ctx.Err() == nil; i++ {
				_, err := conn.Exec(ctx, `INSERT INTO bench_baseline (k, body) VALUES ($1, $2)`,
					fmt.Sprintf("evt_%d_%d", c, i), body)
				if err != nil {
					if ctx.Err() == nil {
						errc <- err
					}
					return
				}
				n.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	if err := <-errc; err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return 0, fmt.Errorf("insert loop: %w", err)
	}
	return float64(n.Load()) / time.Since(start).Seconds(), nil
}
