package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"golang.org/x/sync/errgroup"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/partitions"
)

// fillSpan is how far back the generated history goes: the oldest action was
// created this long before the fill, the newest at it, at an even rate.
const fillSpan = 30 * 24 * time.Hour

// longHistory is the action (enq_g_500) given a long history: attempts a retry
// apart and people's notes, assignments and retries, for the action page's row.
const longHistory = 500

// generateHistory adds actions lo..hi (inclusive) of a history of $8 actions
// with i % $5 = $6, all of client $3 (its source $4, action $7), as a
// long-running installation holds them, in one statement:
//
//   - each action created at an even rate over the $10 seconds before $9, its
//     attempts and audit in its day's partitions (rows_day), mostly confirmed,
//     5% failed for one of three causes and waiting for a person (so the first
//     thousand already fill a page), 1% resolved, 1% cancelled; none due, so no
//     worker stirs;
//   - the event that asked for it (every seventh delivered twice), routed and
//     linked, with a small body in its day's partition;
//   - one call per action (eight for a destination that did not answer, two for
//     one resolved by hand), and the acts of people: the resolution, the
//     cancellation, a note on a third of the failed;
//   - action longHistory: 60 attempts and 40 people's acts.
//
// The attempts' and audit's ids are the action's id * 64 + n (sequences set past
// them afterwards, fillSequences): no sequence is read in the statement, which
// Citus would refuse, and fills run side by side.
const generateHistory = `
WITH g AS (
    SELECT i, at, (at AT TIME ZONE 'UTC')::date AS day,
           CASE WHEN i % 100 < 5 THEN 'failed' WHEN i % 100 = 5 THEN 'resolved' WHEN i % 100 = 6 THEN 'cancelled'
                ELSE 'confirmed' END AS state,
           CASE WHEN i = 500 THEN 60 WHEN i % 100 = 4 THEN 8 WHEN i % 100 = 5 THEN 2 ELSE 1 END AS calls
    FROM (SELECT i, $9::timestamptz - make_interval(secs => ($8::bigint - i)::double precision * $10::double precision / $8::bigint) AS at
          FROM generate_series($1::bigint, $2::bigint) AS i
          WHERE i % $5::bigint = $6::bigint) s),
a AS (
    INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
        destination, params, params_sha256, param_values, state, reason, owner, attempts, max_attempts, give_up_at,
        next_attempt_at, first_attempt_at, last_attempt_at, external_ref, created_at, updated_at, state_since, rows_day)
    SELECT $3::text, 'live', $4::text, $7::text, 'enq_g_' || i, jsonb_build_array('enq_g_' || i), md5('opk' || i), 'crm',
           jsonb_build_object('enquiry_id', 'enq_g_' || i, 'amount', 500 + (i % 5000) * 100,
                              'email', 'buyer' || (i % 100000) || '@example.com'),
           sha256(('p' || i)::bytea),
           -- action_param_values(params), which the insert trigger would call a row at a time
           jsonb_build_array((500 + (i % 5000) * 100)::text, 'buyer' || (i % 100000) || '@example.com', 'enq_g_' || i),
           state,
           CASE WHEN i % 100 < 3 THEN 'the destination refused it: 422 amount must be positive'
                WHEN i % 100 = 3 THEN 'the destination refused it: 422 email is not a valid address'
                WHEN i % 100 = 4 THEN 'attempts or elapsed budget spent: 8 attempts, the destination did not answer within 5s'
                WHEN i % 100 = 5 THEN 'resolved by sales-ops@example.com: opened by hand'
                WHEN i % 100 = 6 THEN 'cancelled: the enquiry was withdrawn'
                ELSE '2xx from destination: HTTP 201' END,
           CASE i % 3 WHEN 0 THEN 'sales-ops@example.com' WHEN 1 THEN 'crm-admin@example.com' ELSE '' END,
           calls, 8, at + interval '72 hours', at, at, at + (calls - 1) * interval '1 minute',
           CASE WHEN i % 100 >= 7 THEN 'opp_' || i ELSE '' END,
           at, at + calls * interval '1 minute', at + calls * interval '1 minute', day
    FROM g
    RETURNING id, business_key, operation_key, params, params_sha256, state, reason, attempts, created_at, rows_day),
ev AS (
    INSERT INTO events (client, environment, source, source_event_id, type, status, body_sha256,
        received_at, last_received_at, deliveries, routed_at, body_day)
    SELECT $3::text, 'live', $4::text, 'evt_g_' || substr(business_key, 7), 'checkout.session.completed', 'routed',
           sha256(('b' || business_key)::bytea), created_at, created_at,
           1 + (substr(business_key, 7)::bigint % 7 = 0)::int, created_at, rows_day
    FROM a
    RETURNING id, source_event_id, body_day),
link AS (
    INSERT INTO action_events (client, action_id, event_id, params, params_sha256, linked_at)
    SELECT $3::text, a.id, ev.id, a.params, a.params_sha256, a.created_at
    FROM a JOIN ev ON ev.source_event_id = 'evt_g_' || substr(a.business_key, 7)),
body AS (
    INSERT INTO event_bodies (client, event_id, day, body, headers)
    SELECT $3::text, ev.id, ev.body_day,
           convert_to('{"id":"' || ev.source_event_id || '","type":"checkout.session.completed","data":{"object":'
                      || '{"object":"checkout.session","amount_total":40500,"metadata":{"enquiry_id":"enq_g_'
                      || substr(ev.source_event_id, 7) || '"}}}}', 'UTF8'),
           '{"Content-Type":["application/json"]}'
    FROM ev),
call AS (
    INSERT INTO attempts (id, client, action_id, kind, operation_key, worker, status, observed, http_status,
        error, evidence, started_at, finished_at, part_day)
    SELECT a.id * 64 + n, $3::text, a.id, 'call', a.operation_key, 'worker-1', 'finished',
           CASE WHEN n < a.attempts AND a.state <> 'resolved' THEN 'unsure (timeout after sending, other 5xx, crash after the call)'
                WHEN a.state IN ('confirmed', 'resolved') THEN '2xx from destination'
                WHEN a.reason LIKE '%422%' THEN 'rejected by the destination (4xx)'
                ELSE 'unsure (timeout after sending, other 5xx, crash after the call)' END,
           CASE WHEN n < a.attempts AND a.state <> 'resolved' THEN NULL
                WHEN a.state IN ('confirmed', 'resolved') THEN 201 WHEN a.reason LIKE '%422%' THEN 422 END,
           CASE WHEN a.state IN ('confirmed', 'resolved') OR a.reason LIKE '%422%' THEN ''
                ELSE 'context deadline exceeded (Client.Timeout exceeded while awaiting headers)' END,
           '', a.created_at + (n - 1) * interval '1 minute', a.created_at + (n - 1) * interval '1 minute' + interval '80 ms',
           a.rows_day
    FROM a CROSS JOIN LATERAL generate_series(1, a.attempts) AS n),
act AS (
    INSERT INTO audit (id, client, action_id, actor, act, note, detail, at, part_day)
    SELECT a.id * 64 + n, $3::text, a.id, p.actor, p.act, p.note, '{}', a.created_at + n * interval '1 hour', a.rows_day
    FROM a CROSS JOIN LATERAL (
        SELECT 1 AS n, 'sales-ops@example.com' AS actor, 'resolve' AS act, 'opened by hand' AS note WHERE a.state = 'resolved'
        UNION ALL
        SELECT 1, 'sales-ops@example.com', 'cancel', 'the enquiry was withdrawn' WHERE a.state = 'cancelled'
        UNION ALL
        SELECT 1, 'crm-admin@example.com', 'note', 'asked the buyer for the amount' WHERE a.state = 'failed'
            AND substr(a.business_key, 7)::bigint % 3 = 0 AND a.business_key <> 'enq_g_500'
        UNION ALL
        SELECT k, 'sales-ops@example.com', (ARRAY['note', 'assign', 'retry', 'note'])[1 + k % 4], 'step ' || k
        FROM generate_series(1, 40) AS k WHERE a.business_key = 'enq_g_500') p)
SELECT count(*), coalesce(max(id), 0) FROM a`

// fillBytesPerAction is what one generated action takes on disk with its event,
// link, body, attempts and audit, their indexes and the WAL written meanwhile (a
// million measured 2.4 KB; the rest is headroom).
const fillBytesPerAction = 3 << 10

// historyFill generates the growth rows' history into a database: fill adds
// actions from..to with everything generateHistory gives them.
type historyFill struct {
	pool    *pgxpool.Pool
	clients []string                          // each generated action's client, in turn
	names   func(c string) (src, name string) // client c's source and action
	total   int                               // the history's final size: ages are spread over it
	now     time.Time                         // the newest action's creation
	dataDir string                            // where Postgres keeps its files, for the disk check ("" for none)
	// bulk is the fill size from which the tables' secondary indexes, unique
	// constraints and foreign keys are dropped before and built again after the
	// rows: 0 never (a Citus cluster), 1 always.
	bulk     int
	parallel int // statements run at once
	// progress is told what was filled so far, after each statement, one call at a time.
	progress func(done, of int, took time.Duration)
}

// fillTables are the tables generateHistory writes.
var fillTables = []string{"actions", "events", "action_events", "event_bodies", "attempts", "audit"}

// fill adds actions from..to (and what goes with them), then leaves the tables
// vacuumed, analysed and checkpointed, every index and constraint as the
// migrations made them.
func (f *historyFill) fill(ctx context.Context, from, to int) (err error) {
	if to < from {
		return nil
	}
	if err := f.checkDisk(to - from + 1); err != nil {
		return err
	}
	first, last := f.now.Add(-fillSpan).AddDate(0, 0, -1), f.now.AddDate(0, 0, 1)
	if _, err := partitions.Make(ctx, db.New(f.pool), first, last); err != nil {
		return err
	}
	if f.bulk > 0 && to-from+1 >= f.bulk {
		indexes, keys, err := dropForBulk(ctx, f.pool, fillTables)
		if err != nil {
			return err
		}
		defer func() {
			// Built again even when the fill failed: the database stays usable.
			log.Printf("growth: building %d indexes and unique constraints, then %d foreign keys", len(indexes), len(keys))
			t0 := time.Now()
			rerr := runEach(ctx, f.pool, max(f.parallel, 1), indexes)
			if rerr == nil {
				rerr = runEach(ctx, f.pool, max(f.parallel, 1), keys)
			}
			if rerr != nil {
				err = errors.Join(err, fmt.Errorf("growth: building the indexes again: %w", rerr))
			}
			log.Printf("growth: built them in %s", time.Since(t0).Round(time.Second))
			if err == nil {
				err = f.settle(ctx)
			}
		}()
	} else {
		defer func() {
			if err == nil {
				err = f.settle(ctx)
			}
		}()
	}
	return f.insert(ctx, from, to)
}

// fillChunk is how many actions one statement generates (over every client).
const fillChunk = 200_000

// insert runs generateHistory over from..to, a chunk and a client a statement,
// f.parallel at a time, and sets the sequences past the ids it gave.
func (f *historyFill) insert(ctx context.Context, from, to int) error {
	type job struct{ lo, hi, k int }
	var jobs []job
	for lo := from; lo <= to; lo += fillChunk {
		for k := range f.clients {
			jobs = append(jobs, job{lo, min(lo+fillChunk-1, to), k})
		}
	}
	var mu sync.Mutex
	done, maxID, t0 := 0, int64(0), time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(max(f.parallel, 1))
	for _, j := range jobs {
		g.Go(func() error {
			c := f.clients[j.k]
			src, name := f.names(c)
			var n, top int64
			if err := f.pool.QueryRow(gctx, generateHistory, j.lo, j.hi, c, src, len(f.clients), j.k, name,
				f.total, f.now, fillSpan.Seconds()).Scan(&n, &top); err != nil {
				return fmt.Errorf("growth: generate actions %d-%d of client %s: %w", j.lo, j.hi, c, err)
			}
			mu.Lock()
			defer mu.Unlock()
			done += int(n)
			maxID = max(maxID, top)
			if f.progress != nil {
				f.progress(done, to-from+1, time.Since(t0))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	return fillSequences(ctx, f.pool, maxID)
}

// fillSequences sets the attempts' and audit's sequences past the ids
// generateHistory gave under action maxID.
func fillSequences(ctx context.Context, pool *pgxpool.Pool, maxID int64) error {
	for _, seq := range []string{"attempts_id_seq", "audit_id_seq"} {
		if _, err := pool.Exec(ctx, `SELECT setval($1::regclass, greatest($2::bigint, (SELECT last_value FROM `+seq+`)))`,
			seq, (maxID+1)*64); err != nil {
			return fmt.Errorf("growth: set %s: %w", seq, err)
		}
	}
	return nil
}

// settle vacuums and analyses the tables (the visibility map is what lets the
// counts read an index alone, as autovacuum would leave it), recounts the
// trends and checkpoints.
func (f *historyFill) settle(ctx context.Context) error {
	log.Printf("growth: vacuum analyze")
	t0 := time.Now()
	var stmts []string
	for _, t := range fillTables {
		stmts = append(stmts, `VACUUM ANALYZE `+t)
	}
	if err := runEach(ctx, f.pool, max(f.parallel, 1), stmts); err != nil {
		return err
	}
	log.Printf("growth: vacuumed in %s", time.Since(t0).Round(time.Second))
	// The generated actions were created in the past, in spans the trends may have
	// counted already (nothing else writes into the past): count them again.
	if _, err := f.pool.Exec(ctx, `TRUNCATE trend_counts; UPDATE trend_horizon SET counted_until = 'epoch'`); err != nil {
		return err
	}
	_, err := f.pool.Exec(ctx, `CHECKPOINT`)
	return err
}

// runEach runs stmts, n at a time, each on a connection with room to sort.
func runEach(ctx context.Context, pool *pgxpool.Pool, n int, stmts []string) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(n)
	for _, s := range stmts {
		g.Go(func() error {
			conn, err := pool.Acquire(gctx)
			if err != nil {
				return err
			}
			defer conn.Release()
			if _, err := conn.Exec(gctx, `SET maintenance_work_mem = '512MB'`); err != nil {
				return err
			}
			defer conn.Exec(context.Background(), `RESET maintenance_work_mem`) //nolint:errcheck // best effort
			if _, err := conn.Exec(gctx, s); err != nil {
				return fmt.Errorf("%s: %w", s, err)
			}
			return nil
		})
	}
	return g.Wait()
}

// dropForBulk drops the tables' foreign keys, unique constraints and indexes but
// their primary keys (which the rows arrive in the order of), and returns the
// statements that make them again as they were: each unique constraint and index
// in turn, then the foreign keys (each checked once, over the whole table, rather
// than a row at a time). An index of a partitioned table is made again on every
// partition.
func dropForBulk(ctx context.Context, pool *pgxpool.Pool, tables []string) (indexes, keys []string, err error) {
	fks, err := dropMake(ctx, pool, `
		SELECT 'ALTER TABLE ' || conrelid::regclass || ' DROP CONSTRAINT ' || quote_ident(conname),
		       'ALTER TABLE ' || conrelid::regclass || ' ADD CONSTRAINT ' || quote_ident(conname) || ' ' || pg_get_constraintdef(oid)
		FROM pg_constraint WHERE contype = 'f' AND conrelid = ANY ($1::regclass[])
		ORDER BY conname`, tables)
	if err != nil {
		return nil, nil, err
	}
	idx, err := dropMake(ctx, pool, `
		SELECT CASE WHEN c.conname IS NOT NULL THEN 'ALTER TABLE ' || i.indrelid::regclass || ' DROP CONSTRAINT ' || quote_ident(c.conname)
		            ELSE 'DROP INDEX ' || i.indexrelid::regclass END,
		       CASE WHEN c.conname IS NOT NULL THEN 'ALTER TABLE ' || i.indrelid::regclass || ' ADD CONSTRAINT '
		                || quote_ident(c.conname) || ' ' || pg_get_constraintdef(c.oid)
		            ELSE replace(pg_get_indexdef(i.indexrelid), ' ON ONLY ', ' ON ') END
		FROM pg_index i LEFT JOIN pg_constraint c ON c.conindid = i.indexrelid AND c.conrelid = i.indrelid
		WHERE i.indrelid = ANY ($1::regclass[]) AND NOT i.indisprimary
		ORDER BY i.indexrelid::regclass::text`, tables)
	if err != nil {
		return nil, nil, err
	}
	var drops []string
	for _, s := range fks {
		drops, keys = append(drops, s[0]), append(keys, s[1])
	}
	for _, s := range idx {
		drops, indexes = append(drops, s[0]), append(indexes, s[1])
	}
	if _, err := pool.Exec(ctx, strings.Join(drops, "; ")); err != nil {
		return nil, nil, fmt.Errorf("growth: drop the indexes for the fill: %w", err)
	}
	log.Printf("growth: dropped %d indexes and constraints for the fill (primary keys kept)", len(drops))
	return indexes, keys, nil
}

// dropMake reads pairs of statements (drop, make) for tables.
func dropMake(ctx context.Context, pool *pgxpool.Pool, sql string, tables []string) ([][2]string, error) {
	rows, err := pool.Query(ctx, sql, tables)
	if err != nil {
		return nil, fmt.Errorf("growth: read the indexes: %w", err)
	}
	defer rows.Close()
	var out [][2]string
	for rows.Next() {
		var p [2]string
		if err := rows.Scan(&p[0], &p[1]); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("growth: read the indexes: %w", err)
	}
	return out, nil
}

// checkDisk refuses a fill of n actions that the disk under the data directory
// cannot hold, saying what it needs and what is free.
func (f *historyFill) checkDisk(n int) error {
	if f.dataDir == "" {
		return nil
	}
	free, err := freeBytes(f.dataDir)
	if err != nil {
		return fmt.Errorf("growth: the free disk under %s: %w", f.dataDir, err)
	}
	return diskEnough(n, free, f.dataDir)
}

// diskEnough says whether free bytes hold n actions' history, in plain words
// when they do not.
func diskEnough(n int, free uint64, dir string) error {
	need := uint64(n) * fillBytesPerAction
	if free < need {
		return fmt.Errorf("growth: %s actions need about %s free under %s, and %s is: free some space, or ask for fewer with -rows",
			thousands(int64(n)), gib(need), dir, gib(free))
	}
	log.Printf("growth: %s actions need about %s; %s is free under %s", thousands(int64(n)), gib(need), gib(free), dir)
	return nil
}

func freeBytes(dir string) (uint64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return 0, err
	}
	return st.Bavail * uint64(st.Bsize), nil
}

func gib(b uint64) string { return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30)) }

// fillProgress logs a fill's progress at most every 10 s, with the time left at
// the rate so far.
func fillProgress() func(done, of int, took time.Duration) {
	var mu sync.Mutex
	var last time.Time
	return func(done, of int, took time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if done < of && time.Since(last) < 10*time.Second {
			return
		}
		last = time.Now()
		left := time.Duration(float64(took) * float64(of-done) / float64(max(done, 1)))
		log.Printf("growth: %s of %s actions (%d%%) in %s, about %s to go", thousands(int64(done)), thousands(int64(of)),
			100*done/max(of, 1), took.Round(time.Second), left.Round(time.Second))
	}
}
