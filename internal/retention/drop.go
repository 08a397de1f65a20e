package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

// The tables partitioned by day lose a day by dropping its partition once the
// whole day is past its window, never by deleting its rows: first what is still
// needed is carried forward into today's partition, by rule (EventBodiesCarry,
// ActionRowsLock and ActionRowsMove), then the partition is detached and dropped.

// bodiesWindow is how long event_bodies keeps a day: drop_bodies_after when set,
// else the longest remember window of the sources (a body outlives no identity
// it could serve); 0 keeps every day.
func bodiesWindow(cfg *settings.Config) time.Duration {
	if cfg.Retention.DropBodiesAfter > 0 {
		return cfg.Retention.DropBodiesAfter
	}
	var w time.Duration
	for _, src := range cfg.Sources {
		w = max(w, src.Remember)
	}
	return w
}

// longerBodies are the clients whose bodies window is longer than the shared
// days' (w), each with the oldest delivery it still keeps at now: the carry of
// a day past w keeps their bodies its window holds.
func longerBodies(cfg *settings.Config, w time.Duration, now time.Time) db.EventBodiesCarryParams {
	var p db.EventBodiesCarryParams
	for _, c := range cfg.Clients() {
		if cw := cfg.ClientBodiesWindow(c); cw > w {
			p.KeepClients, p.KeepSince = append(p.KeepClients, c), append(p.KeepSince, now.Add(-cw))
		}
	}
	return p
}

// pastDay is the first day not wholly past window at now: a day before it ended
// before now - window.
func pastDay(now time.Time, window time.Duration) time.Time {
	return partitions.Day(now.Add(-window))
}

// dropDays drops the days of event_bodies, and those of attempts and audit,
// wholly past their windows, counted into r.
func dropDays(ctx context.Context, pool *pgxpool.Pool, s store.Store, q *db.Queries, cfg *settings.Config,
	now time.Time, r *PruneReport) error {
	today := partitions.Day(now)
	if w := bodiesWindow(cfg); w > 0 {
		days, err := q.PartitionsPast(ctx, db.PartitionsPastParams{Parent: "event_bodies", Before: pastDay(now, w)})
		if err != nil {
			return fmt.Errorf("list the days of event bodies past %s: %w", w, err)
		}
		keep := longerBodies(cfg, w, now)
		for _, d := range days {
			p := keep
			p.FromDay, p.ToDay, p.Batch = d.Day, today, pruneBatch
			n, err := carry(ctx, q, today, func() (int64, error) { return s.CarryBodies(ctx, q, p) })
			r.BodiesCarried += n
			if err != nil {
				return fmt.Errorf("carry forward the bodies of %s still needed: %w", d.Name, err)
			}
			if err := s.DropPartition(ctx, pool, "event_bodies", d.Name, d.DetachPending); err != nil {
				return err
			}
			r.BodyDays++
		}
	}
	return dropActionDays(ctx, pool, s, q, pastDay(now, cfg.Retention.Actions), today, r)
}

// dropActionDays drops the days of attempts and audit that end before before,
// once no action has its rows there: those still there are carried forward
// first (the closed ones past the window were pruned before). A day one of
// whose actions a worker holds, or a person is acting on, is kept for the next
// pass.
func dropActionDays(ctx context.Context, pool *pgxpool.Pool, s store.Store, q *db.Queries, before, today time.Time,
	r *PruneReport) error {
	type part struct {
		parent string
		db.PartitionsPastRow
	}
	byDay := map[time.Time][]part{}
	var order []time.Time
	for _, parent := range []string{"attempts", "audit"} {
		days, err := q.PartitionsPast(ctx, db.PartitionsPastParams{Parent: parent, Before: before})
		if err != nil {
			return fmt.Errorf("list the days of %s past the ledger window: %w", parent, err)
		}
		for _, d := range days {
			if byDay[d.Day] == nil {
				order = append(order, d.Day)
			}
			byDay[d.Day] = append(byDay[d.Day], part{parent, d})
		}
	}
	for _, day := range order {
		n, err := carry(ctx, q, today, func() (int64, error) { return s.CarryActionRows(ctx, pool, q, day, today, pruneBatch) })
		r.ActionsCarried += n
		if err != nil {
			return fmt.Errorf("carry forward the rows of the actions of %s: %w", day.Format(time.DateOnly), err)
		}
		left, err := q.ActionRowsLeft(ctx, day)
		if err != nil {
			return fmt.Errorf("count the actions left in %s: %w", day.Format(time.DateOnly), err)
		}
		if left > 0 {
			r.DaysKept++
			continue
		}
		for _, p := range byDay[day] {
			if err := s.DropPartition(ctx, pool, p.parent, p.Name, p.DetachPending); err != nil {
				return err
			}
			r.RowDays++
		}
	}
	return nil
}

// carry runs batch until it carries nothing more, into today's partitions
// (made when missing), and returns how many it carried.
func carry(ctx context.Context, q *db.Queries, today time.Time, batch func() (int64, error)) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		var n int64
		err := partitions.Retry(ctx, q, today, func() (err error) { n, err = batch(); return err })
		total += n
		if err != nil || n == 0 {
			return total, err
		}
	}
	return total, ctx.Err()
}
