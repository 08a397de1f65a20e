package retention

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

// pruneBatch bounds each delete: short transactions, never a long lock.
const pruneBatch = 1000

// PruneReport says what one prune removed.
type PruneReport struct {
	Events         int64 // delivery identities past their source's remember window
	BodiesDropped  int64 // bodies removed from events' own rows (stored before event_bodies), identities kept
	BodyDays       int   // days of event_bodies dropped, identities kept
	BodiesCarried  int64 // bodies still needed carried forward out of those days
	ClientBodies   int64 // bodies of a client with a shorter window of its own, deleted
	Actions        int64 // closed actions past the ledger window
	RowDays        int   // days of attempts and audit dropped
	ActionsCarried int64 // actions whose rows were carried forward out of those days
	DaysKept       int   // days past the window kept for the next pass (an action held there)
	Resources      int64
	Sessions       int64 // expired dashboard sessions
	Skipped        bool  // another process was pruning
}

// pruneLock keeps two pruners apart (a session-level advisory lock).
const pruneLock = 7262531

// Prune applies the retention windows now, in small batches, each its own short
// transaction. Only one process prunes at a time; the others skip.
func Prune(ctx context.Context, pool *pgxpool.Pool, cfg *settings.Config, now time.Time) (PruneReport, error) {
	var r PruneReport
	held, err := db.WithSessionLock(ctx, pool, pruneLock, false, func(q *db.Queries) error {
		if err := prune(ctx, q, store.For(pool), cfg, now, &r); err != nil {
			return err
		}
		if err := dropDays(ctx, pool, store.For(pool), q, cfg, now, &r); err != nil {
			return fmt.Errorf("drop the days past their windows: %w", err)
		}
		var err error
		r.Sessions, err = accounts.DeleteExpiredSessions(ctx, pool)
		return err
	})
	r.Skipped = err == nil && !held
	return r, err
}

// prune is Prune's work under its lock, counted into r.
func prune(ctx context.Context, q *db.Queries, s store.Store, cfg *settings.Config, now time.Time, r *PruneReport) error {
	var err error
	for _, src := range cfg.Sources {
		n, err := drain(ctx, func() (int64, error) {
			return q.EventPruneSource(ctx, db.EventPruneSourceParams{Source: src.Name, Before: now.Add(-src.Remember), Batch: pruneBatch})
		})
		r.Events += n
		if err != nil {
			return fmt.Errorf("prune events of %s: %w", src.Name, err)
		}
	}
	if d := cfg.Retention.DropBodiesAfter; d > 0 {
		before := now.Add(-d)
		if r.BodiesDropped, err = drain(ctx, func() (int64, error) {
			return q.EventDropBodies(ctx, db.EventDropBodiesParams{Before: &before, Batch: pruneBatch})
		}); err != nil {
			return fmt.Errorf("drop event bodies: %w", err)
		}
	}
	// The loader gives the default and refuses anything not positive; a config
	// built otherwise must not prune every closed action at once.
	keep := cfg.Retention.Actions
	if keep <= 0 {
		return fmt.Errorf("prune closed actions: retention.actions is %s, not positive", keep)
	}
	if err := pruneClients(ctx, q, s, cfg, now, r); err != nil {
		return err
	}
	before := now.Add(-keep)
	if r.Resources, err = drain(ctx, func() (int64, error) {
		return q.ResourcePrune(ctx, db.ResourcePruneParams{Before: &before, Batch: pruneBatch})
	}); err != nil {
		return fmt.Errorf("prune resources: %w", err)
	}
	return nil
}

// pruneClients prunes each client's closed actions past its window (its own or
// the shared one), and the bodies of a client whose own window is shorter than
// the shared days': client by client, through indexes that lead with the
// client. Every client with actions stored is pruned, the config's or not.
func pruneClients(ctx context.Context, q *db.Queries, s store.Store, cfg *settings.Config, now time.Time, r *PruneReport) error {
	stored, err := s.StoredClients(ctx, q)
	if err != nil {
		return fmt.Errorf("list the clients with actions: %w", err)
	}
	clients := append(slices.Clone(cfg.Clients()), stored...)
	slices.Sort(clients)
	for _, c := range slices.Compact(clients) {
		before := now.Add(-cfg.ActionsWindow(c))
		n, err := drain(ctx, func() (int64, error) {
			return q.ActionPruneClosed(ctx, db.ActionPruneClosedParams{Client: c, Before: before, Batch: pruneBatch})
		})
		r.Actions += n
		if err != nil {
			return fmt.Errorf("prune the closed actions of %s: %w", c, err)
		}
	}
	shared := bodiesWindow(cfg)
	for _, c := range cfg.Clients() {
		w := cfg.ClientBodiesWindow(c)
		if w == 0 || shared > 0 && w >= shared {
			continue
		}
		n, err := drain(ctx, func() (int64, error) {
			return q.EventBodiesDropOfClient(ctx, db.EventBodiesDropOfClientParams{Client: c, BeforeDay: pastDay(now, w),
				Batch: pruneBatch})
		})
		r.ClientBodies += n
		if err != nil {
			return fmt.Errorf("drop the event bodies of %s past its window: %w", c, err)
		}
	}
	return nil
}

// drain runs one batch at a time until a batch comes back short.
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
