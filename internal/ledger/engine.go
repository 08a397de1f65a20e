package ledger

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/internal/batch"
)

// Engine runs this process's workers: a Router that turns received events into
// actions and a Performer that performs them, reconciles what is uncertain and
// recovers lapsed leases. Every process runs one; they coordinate only through
// Postgres. The engine owns only what the two share: the notification listener.
type Engine struct {
	router    *Router
	performer *Performer
	pool      *pgxpool.Pool
	logger    *slog.Logger
	poll      time.Duration
}

// NewEngine returns an Engine with defaults applied.
func NewEngine(p EngineParams) *Engine {
	p.setDefaults()
	performers := newWakeup(p.Pool, channelActions, p.Logger) // shared: calls from both fold together
	mode := newDatabaseMode(p.Pool)
	return &Engine{
		pool: p.Pool, logger: p.Logger, poll: p.Poll,
		router:    newRouter(p, mode, performers),
		performer: newPerformer(p, mode, performers),
	}
}

// RouteBatch routes up to n received events now; see Router.RouteBatch.
func (e *Engine) RouteBatch(ctx context.Context, n int) (int, error) {
	return e.router.RouteBatch(ctx, n)
}

// RecoverLeases applies the decision table to lapsed claims now; see
// Performer.RecoverLeases.
func (e *Engine) RecoverLeases(ctx context.Context) (int, error) {
	return e.performer.RecoverLeases(ctx)
}

// Worker is the name this engine writes into leases and attempts.
func (e *Engine) Worker() string { return e.performer.Worker() }

// Run routes, performs, reconciles and recovers until ctx ends, then lets calls in
// flight finish within the grace period and hands back the claims it never started.
func (e *Engine) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	loops := []func(context.Context){e.listenLoop, e.router.routeLoop, e.performer.performLoop, e.performer.recoverLoop}
	for _, loop := range loops {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	wg.Wait()
	return e.performer.finish(ctx)
}

// listenLoop turns Postgres notifications into wake-ups; polling covers its gaps.
func (e *Engine) listenLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := e.listen(ctx); err != nil && ctx.Err() == nil {
			e.logger.Debug("listen for notifications", "err", err)
			batch.Sleep(ctx, e.poll)
		}
	}
}

func (e *Engine) listen(ctx context.Context) error {
	conn, err := e.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire listener: %w", err)
	}
	defer conn.Release()
	for _, ch := range []string{channelEvents, channelActions} {
		if _, err := conn.Exec(ctx, "LISTEN "+ch); err != nil {
			conn.Conn().Close(ctx) //nolint:errcheck // the pool discards it
			return fmt.Errorf("listen %s: %w", ch, err)
		}
	}
	defer conn.Conn().Close(context.Background()) //nolint:errcheck // LISTEN state must not go back to the pool
	for {
		n, err := conn.Conn().WaitForNotification(ctx)
		if err != nil {
			return fmt.Errorf("wait for notification: %w", err)
		}
		switch n.Channel {
		case channelEvents:
			e.router.Wake()
		case channelActions:
			e.performer.Wake()
		}
	}
}
