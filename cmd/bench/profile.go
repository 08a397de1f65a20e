package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// profile runs one phase against oncehook in-process, with a CPU profile of the
// whole process (server and load generator) for go tool pprof and
// pg_stat_statements for the database's side, and prints where the time went.
func (b *bench) profile(ctx context.Context) error {
	if err := b.pg.enableStatements(ctx); err != nil {
		return err
	}
	dest, err := startDestination()
	if err != nil {
		return err
	}
	defer dest.close()
	b.dest = dest
	if b.config, b.addr, err = b.writeConfig(dest, "bench.yaml"); err != nil {
		return err
	}
	concurrency := 16
	if b.o.phase == "slow" {
		concurrency = 64
		dest.delay.Store(int64(100 * time.Millisecond))
	}
	srv, err := b.startInProcess(ctx, b.config, concurrency)
	if err != nil {
		return err
	}
	defer srv.stop()
	f, err := os.Create(b.o.profile)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := b.pg.exec(ctx, `SELECT pg_stat_statements_reset(), pg_stat_reset(), pg_stat_reset_shared('wal')`); err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		return err
	}
	before := b.parties().sample()
	done, what, err := b.profiledPhase(ctx, srv.url)
	if err != nil {
		pprof.StopCPUProfile()
		return err
	}
	after := b.parties().sample()
	pprof.StopCPUProfile()
	fmt.Println(what)
	b.printCPU(before, after, done)
	if err := b.pg.printStatements(ctx, done); err != nil {
		return err
	}
	time.Sleep(time.Second) // backends report their table statistics within a second
	return b.pg.printTableWrites(ctx, done)
}

// profiledPhase runs the phase -phase names against the server at url, and
// returns how many items it completed and a line saying how it went.
func (b *bench) profiledPhase(ctx context.Context, url string) (done float64, what string, err error) {
	switch b.o.phase {
	case "ingest":
		var n atomic.Int64
		r := newPoster(url, b.o.senders).runLoad(ctx, b.o.senders, 2*time.Second, b.o.seconds, func() []byte {
			i := n.Add(1) - 1
			return eventBody(fmt.Sprintf("evt_p_%d", i), fmt.Sprintf("enq_p_%d", i), typeIgnored)
		})
		return float64(r.acked), fmt.Sprintf("ingest: %s acknowledged, p50 %s, p99 %s", perSec(r.rate()), ms(r.p50), ms(r.p99)), nil
	case "e2e", "slow":
		n := int(1000 * b.o.seconds.Seconds())
		if b.o.phase == "slow" {
			n = int(300 * b.o.seconds.Seconds())
		}
		r, err := b.runE2E(ctx, url, "p", n, 8*b.o.seconds)
		if err != nil {
			return 0, "", err
		}
		return float64(r.n), fmt.Sprintf("%s: %s confirmed; %s", b.o.phase, perSec(r.rate()), r.describe(b.o.phase)), nil
	default:
		return 0, "", fmt.Errorf("no phase %q to profile: ingest, e2e or slow", b.o.phase)
	}
}

// printCPU prints the CPU used between before and after, in all and per item done,
// and where the Go profile is.
func (b *bench) printCPU(before, after cpuSample, done float64) {
	use := before.to(after)
	secs := after.at.Sub(before.at).Seconds()
	fmt.Printf("CPU: %s\nper item: %.0f µs in this process (server and load generator), %.0f µs in postgres\n",
		use, use.bench/100*secs/done*1e6, use.postgres/100*secs/done*1e6)
	fmt.Printf("Go profile: %s (go tool pprof -top %s)\n\nstatements by total time:\n", b.o.profile, b.o.profile)
}

// enableStatements restarts the bench's Postgres with pg_stat_statements loaded, and
// auto_explain logging the plan of every statement slower than 8 ms to the server
// log (kept with -keep), which is how a stale generic plan shows.
func (pg *postgres) enableStatements(ctx context.Context) error {
	if err := pg.exec(ctx, `ALTER SYSTEM SET shared_preload_libraries = pg_stat_statements, auto_explain`); err != nil {
		return err
	}
	pg.pool.Close()
	if err := pg.emb.Stop(ctx); err != nil {
		return err
	}
	if err := pg.emb.Start(ctx); err != nil {
		return err
	}
	var err error
	if pg.pool, err = openPool(ctx, pg.dsn); err != nil {
		return err
	}
	for _, q := range []string{
		`ALTER SYSTEM SET auto_explain.log_min_duration = '8ms'`,
		`ALTER SYSTEM SET auto_explain.log_analyze = on`,
		`ALTER SYSTEM SET auto_explain.log_buffers = on`,
		`ALTER SYSTEM SET pg_stat_statements.track_planning = on`,
		`SELECT pg_reload_conf()`,
	} {
		if err := pg.exec(ctx, q); err != nil {
			return err
		}
	}
	return pg.exec(ctx, `CREATE EXTENSION IF NOT EXISTS pg_stat_statements`)
}

func (pg *postgres) printStatements(ctx context.Context, items float64) error {
	rows, err := pg.pool.Query(ctx, `
SELECT calls, total_exec_time, total_plan_time, rows, wal_records, wal_bytes,
       left(regexp_replace(query, '\s+', ' ', 'g'), 90)
FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
ORDER BY total_exec_time + total_plan_time DESC LIMIT 20`)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Printf("%9s %10s %9s %9s %11s %9s %9s  %s\n", "calls", "exec ms", "per item", "plan/item", "rows", "WAL rec", "WAL B", "statement")
	for rows.Next() {
		var calls, nrows, walRecords int64
		var total, plan float64
		var walBytes pgtype.Numeric
		var q string
		if err := rows.Scan(&calls, &total, &plan, &nrows, &walRecords, &walBytes, &q); err != nil {
			return err
		}
		wb, _ := walBytes.Float64Value()
		fmt.Printf("%9d %10.0f %7.0fµs %7.0fµs %11d %9.1f %9.0f  %s\n", calls, total, total*1000/items, plan*1000/items, nrows,
			float64(walRecords)/items, wb.Float64/items, q)
	}
	return rows.Err()
}

// printTableWrites prints, per item, the rows each table took in, the versions
// written by updates and how many of those were HOT (no index entry written), the
// size of its heap and its indexes (the whole table, over the items of this run:
// the phase starts on an empty database), and the WAL the whole server wrote, so a change's effect shows in the writes it
// saves as well as in the noisier CPU figures.
func (pg *postgres) printTableWrites(ctx context.Context, items float64) error {
	rows, err := pg.pool.Query(ctx, `
SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_tup_del,
       pg_relation_size(relid), pg_indexes_size(relid)
FROM pg_stat_user_tables WHERE n_tup_ins + n_tup_upd + n_tup_del > 0 ORDER BY relname`)
	if err != nil {
		return err
	}
	defer rows.Close()
	fmt.Printf("\nwrites per item:\n%-16s %8s %8s %8s %8s %11s %11s\n", "table", "inserts", "updates", "HOT", "deletes",
		"heap B", "indexes B")
	for rows.Next() {
		var name string
		var ins, upd, hot, del, heap, indexes int64
		if err := rows.Scan(&name, &ins, &upd, &hot, &del, &heap, &indexes); err != nil {
			return err
		}
		fmt.Printf("%-16s %8.2f %8.2f %7.0f%% %8.2f %11.0f %11.0f\n", name, float64(ins)/items, float64(upd)/items,
			100*float64(hot)/float64(max(upd, 1)), float64(del)/items, float64(heap)/items, float64(indexes)/items)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	var records, fpi int64
	var walBytes float64
	if err := pg.pool.QueryRow(ctx, `SELECT wal_records, wal_fpi, wal_bytes::float8 FROM pg_stat_wal`).Scan(&records, &fpi, &walBytes); err != nil {
		return err
	}
	fmt.Printf("WAL per item: %.0f bytes, %.1f records, %.2f full-page images\n",
		walBytes/items, float64(records)/items, float64(fpi)/items)
	return nil
}
