package retention

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/settings"
)

// pruneBatch bounds each delete: short transactions, never a long lock.
const pruneBatch = 1000

// PruneReport says what one prune removed.
type PruneReport struct {
	Events        int64 // delivery identities past their source's remember window
	BodiesDropped int64 // bodies removed after drop_bodies_after, identities kept
	Actions       int64 // closed actions past the ledger window
	Resources     int64
	Sessions      int64 // expired dashboard sessions
	Skipped       bool  // another process was pruning
}

// Prune applies the retention windows now, in small batches, each its own short
// transaction. Only one process prunes at a time; the others skip.
func Prune(ctx context.Context, pool *pgxpool.Pool, cfg *settings.Config, now time.Time) (PruneReport, error) {
	var r PruneReport
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return r, fmt.Errorf("acquire connection for pruning: %w", err)
	}
	defer conn.Release()
	// A session-level lock held for the whole prune keeps two pruners apart without
	// holding any transaction open.
	var locked bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock(7262531)").Scan(&locked); err != nil {
		return r, fmt.Errorf("take prune lock: %w", err)
	}
	if !locked {
		r.Skipped = true
		return r, nil
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock(7262531)") //nolint:errcheck // released with the session anyway
	q := db.New(conn)
	for _, src := range cfg.Sources {
		n, err := drain(ctx, func() (int64, error) {
			return q.EventPruneSource(ctx, db.EventPruneSourceParams{Source: src.Name, Before: now.Add(-src.Remember), Batch: pruneBatch})
		})
		r.Events += n
		if err != nil {
			return r, fmt.Errorf("prune events of %s: %w", src.Name, err)
		}
	}
	if d := cfg.Retention.DropBodiesAfter; d > 0 {
		if r.BodiesDropped, err = dropBodies(ctx, q, now.Add(-d)); err != nil {
			return r, fmt.Errorf("drop event bodies: %w", err)
		}
	}
	// The loader gives the default and refuses anything not positive; a config
	// built otherwise must not prune every closed action at once.
	keep := cfg.Retention.Actions
	if keep <= 0 {
		return r, fmt.Errorf("prune closed actions: retention.actions is %s, not positive", keep)
	}
	before := now.Add(-keep)
	if r.Actions, err = drain(ctx, func() (int64, error) {
		return q.ActionPruneClosed(ctx, db.ActionPruneClosedParams{Before: before, Batch: pruneBatch})
	}); err != nil {
		return r, fmt.Errorf("prune closed actions: %w", err)
	}
	if r.Resources, err = drain(ctx, func() (int64, error) {
		return q.ResourcePrune(ctx, db.ResourcePruneParams{Before: &before, Batch: pruneBatch})
	}); err != nil {
		return r, fmt.Errorf("prune resources: %w", err)
	}
	if r.Sessions, err = accounts.DeleteExpiredSessions(ctx, pool); err != nil {
		return r, err
	}
	return r, nil
}

// drain runs one batch at a time until a batch comes back short.
// dropBodies drops the bytes of the events routed before before, keeping their
// identities and hashes: those still in the events' own rows (stored before
// event_bodies), then those in event_bodies.
func dropBodies(ctx context.Context, q *db.Queries, before time.Time) (int64, error) {
	inRows, err := drain(ctx, func() (int64, error) {
		return q.EventDropBodies(ctx, db.EventDropBodiesParams{Before: &before, Batch: pruneBatch})
	})
	if err != nil {
		return inRows, err
	}
	apart, err := drain(ctx, func() (int64, error) {
		return q.EventBodiesDrop(ctx, db.EventBodiesDropParams{Before: &before, Batch: pruneBatch})
	})
	return inRows + apart, err
}

func drain(ctx context.Context, batch func() (int64, error)) (int64, error) {
	var total int64
	for {
		n, err := batch()
		total += n
		if err != nil || n < pruneBatch || ctx.Err() != nil {
			return total, err
		}
	}
}
