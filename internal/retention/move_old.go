package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/store"
)

// beforeByDay is the day of the partition that holds the attempts and audit
// written before they were partitioned by day (migration 00039): the tables as
// they were, attached from MINVALUE to 1970-01-02.
var beforeByDay = time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC)

// OldRows says what MoveOldRows did.
type OldRows struct {
	Actions int64 // actions whose attempts and audit it moved now
	Dropped bool  // the old partitions are gone (now, or before)
	Busy    bool  // another process was pruning or moving; nothing done
}

// MoveOldRows moves the attempts and audit written before they were partitioned
// by day into today's partitions, 1,000 actions a statement (each action's
// rows_day with them), then drops the old partitions, now empty. Retention
// does the same on its first pass (the day of 1970 is past every window); this
// does it at once, for `oncehook migrate`. progress, if set, hears the running
// total after each batch. Stopped at any point, it has moved whole batches: run
// again, it goes on. An action a worker holds right then is left for a later
// run, and so are the old partitions. One process at a time, as retention's
// passes: with wait, it waits for another to finish.
func MoveOldRows(ctx context.Context, pool *pgxpool.Pool, wait bool, progress func(actions int64)) (OldRows, error) {
	var r OldRows
	held, err := db.WithSessionLock(ctx, pool, pruneLock, wait, func(q *db.Queries) error {
		s, today := store.For(pool), partitions.Day(time.Now())
		n, err := carry(ctx, q, today, func() (int64, error) {
			n, err := s.CarryActionRows(ctx, pool, q, beforeByDay, today, pruneBatch)
			if r.Actions += n; err == nil && n > 0 && progress != nil {
				progress(r.Actions)
			}
			return n, err
		})
		if err != nil {
			return fmt.Errorf("move the attempts and audit of the actions before 00039 (%d moved): %w", n, err)
		}
		var pass PruneReport
		err = dropActionDays(ctx, pool, s, q, beforeByDay.AddDate(0, 0, 1), today, &pass)
		r.Dropped = err == nil && pass.DaysKept == 0 // dropped now, or gone before
		return err
	})
	r.Busy = err == nil && !held
	return r, err
}
