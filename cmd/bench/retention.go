package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/retention"
	"github.com/oncehook/oncehook/internal/settings"
)

// retentionSource names the deliveries the retention phase generates.
const retentionSource = "bench-retention"

// fillRetentionSQL stores the bodies of n routed deliveries (1 KB each) in
// day's partition, as the inbox writes them, with their identities the first
// time; later times the same identities get their bodies again.
const fillRetentionSQL = `
WITH ev AS (
    INSERT INTO events (client, environment, source, source_event_id, type, status, body_sha256,
        received_at, last_received_at, routed_at, body_day)
    SELECT 'acme', 'live', $3::text, 'evt_r_' || i, 'checkout.session.completed', 'routed',
           sha256(('r' || i)::text::bytea), $2::date, $2::date, $2::date, $2::date
    FROM generate_series(1, $1::bigint) AS i
    ON CONFLICT (client, source, source_event_id) DO UPDATE SET body_day = excluded.body_day
    RETURNING client, id)
INSERT INTO event_bodies (client, event_id, day, body, headers)
SELECT client, id, $2::date, convert_to(repeat('{"id":"evt_r_' || id || '"}', 40), 'UTF8'), '{"X-Event-Id":"x"}'
FROM ev`

// retentionPass measures one retention pass over a day's partition of
// -retention-rows deliveries: the pass as it runs (the day's partition detached
// concurrently and dropped, after carrying forward what is still needed, here
// nothing) against the row-by-row delete it replaces (EventBodiesDrop, 1,000
// rows a statement, as retention ran before), on the same rows, in the same run.
func (b *bench) retentionPass(ctx context.Context) error {
	n := b.o.retentionRows
	if n <= 0 {
		return nil
	}
	day := partitions.Day(time.Now()).AddDate(0, 0, -40)
	if _, err := partitions.Make(ctx, db.New(b.pg.pool), day, day); err != nil {
		return err
	}
	if err := b.fillRetentionDay(ctx, n, day); err != nil {
		return err
	}
	rowByRow, err := b.deleteRowByRow(ctx, n, day)
	if err != nil {
		return err
	}
	if err := b.fillRetentionDay(ctx, n, day); err != nil {
		return err
	}
	log.Printf("retention: one pass that drops the day")
	cfg := &settings.Config{Retention: settings.Retention{Actions: settings.DefaultActionRetention,
		DropBodiesAfter: 30 * 24 * time.Hour}}
	t0 := time.Now()
	r, err := retention.Prune(ctx, b.pg.pool, cfg, time.Now())
	pass := time.Since(t0)
	if err != nil {
		return fmt.Errorf("the retention pass: %w", err)
	}
	left, err := b.pg.count(ctx, `SELECT count(*) FROM pg_class WHERE relname = 'event_bodies_`+day.Format("20060102")+`'`)
	if err != nil || left != 0 || r.BodyDays < 1 {
		return fmt.Errorf("the pass left the day (%d, %v; %+v)", left, err, r)
	}
	b.t.add(row{figure: fmt.Sprintf("retention: one pass over a day's partition of %d deliveries (1 KB bodies), "+
		"against the row-by-row delete it replaces", n),
		value: fmt.Sprintf("%s (row by row: %s)", pass.Round(time.Millisecond), rowByRow.Round(time.Millisecond)),
		ratio: speedup(rowByRow, pass)})
	b.t.note("retention: the pass dropped %d days of bodies and carried %d forward; the row-by-row delete "+
		"left %d dead rows for vacuum", r.BodyDays, r.BodiesCarried, n)
	return nil
}

// fillRetentionDay stores n deliveries' bodies in day's partition
// (fillRetentionSQL), then vacuums, analyses and checkpoints.
func (b *bench) fillRetentionDay(ctx context.Context, n int, day time.Time) error {
	log.Printf("retention: storing %d deliveries' bodies in the partition of %s", n, day.Format(time.DateOnly))
	if _, err := b.pg.pool.Exec(ctx, fillRetentionSQL, n, day, retentionSource); err != nil {
		return fmt.Errorf("fill the day: %w", err)
	}
	for _, stmt := range []string{`VACUUM ANALYZE events`, `VACUUM ANALYZE event_bodies`, `CHECKPOINT`} {
		if err := b.pg.exec(ctx, stmt); err != nil {
			return err
		}
	}
	return nil
}

// deleteRowByRow deletes the n bodies of day as retention did before
// (EventBodiesDrop, 1,000 a statement) and returns how long it took.
func (b *bench) deleteRowByRow(ctx context.Context, n int, day time.Time) (time.Duration, error) {
	log.Printf("retention: deleting them row by row")
	q, before := db.New(b.pg.pool), day.AddDate(0, 0, 1)
	t0, deleted := time.Now(), int64(0)
	for {
		k, err := q.EventBodiesDrop(ctx, db.EventBodiesDropParams{Before: &before, Batch: 1000})
		if err != nil {
			return 0, fmt.Errorf("delete row by row: %w", err)
		}
		if deleted += k; k < 1000 {
			break
		}
	}
	took := time.Since(t0)
	if deleted != int64(n) {
		return 0, fmt.Errorf("the row-by-row delete removed %d bodies, want %d", deleted, n)
	}
	return took, nil
}

// speedup says how many times faster than before now is (or slower, when it is).
func speedup(before, now time.Duration) string {
	if now >= before {
		return fmt.Sprintf("%.1fx slower", now.Seconds()/max(before.Seconds(), 0.001))
	}
	return fmt.Sprintf("%.0fx faster", before.Seconds()/max(now.Seconds(), 0.001))
}
