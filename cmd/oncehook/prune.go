package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/retention"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

const pruneUsage = `Usage: oncehook prune --config FILE [--data-dir DIR]

Applies the retention windows now: delivery identities past each source's
remember window, event bodies past retention.drop_bodies_after, closed actions
past retention.actions (default 400 days), each client's past its own windows
where clients: {NAME: {retention: ...}} gives it some. Deletes in small
batches; the server also does this every retention.every (default 1h).
`

func runPrune(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "prune", pruneUsage)
	var df dbFlags
	df.register(fs, env)
	configPath := fs.String("config", "oncehook.yaml", "config file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*configPath, env.getenv)
	if err != nil {
		return err
	}
	return withDatabase(ctx, env, df, func(d *database) error {
		r, err := retention.Prune(ctx, d.Pool, cfg, time.Now())
		if err != nil {
			return err
		}
		if r.Skipped {
			fmt.Fprintln(env.stdout, "another process is pruning right now; nothing done")
			return nil
		}
		fmt.Fprintf(env.stdout, "pruned %d events, %d event bodies (%d of clients with a shorter window of their own), %d closed actions, %d resources\n",
			r.Events, r.BodiesDropped+r.ClientBodies, r.ClientBodies, r.Actions, r.Resources)
		fmt.Fprintf(env.stdout, "dropped %d days of event bodies (%d bodies still needed carried forward), "+
			"%d days of attempts and audit (%d actions' rows carried forward); %d days kept for the next pass\n",
			r.BodyDays, r.BodiesCarried, r.RowDays, r.ActionsCarried, r.DaysKept)
		return nil
	})
}

// pruneEvery prunes on a timer until ctx ends.
func pruneEvery(ctx context.Context, pool *pgxpool.Pool, cfg *settings.Config, logger *slog.Logger) {
	t := time.NewTicker(cfg.Retention.Every) // positive: the loader gives the default
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r, err := retention.Prune(ctx, pool, cfg, time.Now())
		if err != nil {
			if ctx.Err() == nil {
				logger.Warn("prune", "err", err)
			}
			continue
		}
		if !r.Skipped {
			logger.Info("pruned", "events", r.Events, "bodies", r.BodiesDropped, "client_bodies", r.ClientBodies, "actions", r.Actions,
				"body_days", r.BodyDays, "row_days", r.RowDays, "carried_actions", r.ActionsCarried, "days_kept", r.DaysKept)
		}
	}
}

// moveOldBodies moves the bytes of events stored before event_bodies into it
// (partitions.MoveOld), once, logging what it did.
func moveOldBodies(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) {
	r, err := partitions.MoveOld(ctx, pool, store.For(pool), false, nil)
	switch {
	case err != nil && ctx.Err() == nil:
		logger.Warn("move the bodies of older events", "err", err, "moved", r.Bodies)
	case r.Bodies > 0:
		logger.Info("moved the bodies of older events into event_bodies", "events", r.Bodies)
	}
}

// countTrendsEvery keeps the trends' counts current, a minute at most behind, so
// no page of trends has to count much itself.
func countTrendsEvery(ctx context.Context, review *review.Review, logger *slog.Logger) {
	t := time.NewTicker(time.Minute)
	defer t.Stop()
	for {
		if _, err := review.CountTrends(ctx); err != nil && ctx.Err() == nil {
			logger.Warn("count trends", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
