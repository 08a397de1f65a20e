package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/internal/batch"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/performer"
	"github.com/oncehook/oncehook/internal/router"
	"github.com/oncehook/oncehook/internal/store"
)

// Engine runs this process's workers: a Router that turns received events into
// actions and a Performer that performs them, reconciles what is uncertain and
// recovers lapsed leases. Every process runs one; they coordinate only through
// Postgres. The engine owns only what the two share: the notification listener.
type Engine struct {
	router    *router.Router
	performer *performer.Performer
	pool      *pgxpool.Pool
	logger    *slog.Logger
	poll      time.Duration
}

// Params configures the workers; zero durations take the defaults. The performer
// reads all of it, the router its pool, config, logger and poll.
type Params = performer.Params

// New returns an Engine with defaults applied.
func New(p Params) *Engine {
	p.SetDefaults()
	performers := ledger.NewWakeup(p.Pool, ledger.ChannelActions, p.Logger) // shared: calls from both fold together
	// Shared: the database is asked once which it is.
	st := store.For(p.Pool)
	return &Engine{
		pool: p.Pool, logger: p.Logger, poll: p.Poll,
		router:    router.New(router.Params{Pool: p.Pool, Config: p.Config, Logger: p.Logger, Poll: p.Poll}, st, performers),
		performer: performer.New(p, st, performers),
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
	loops := []func(context.Context){e.listenLoop, e.router.RouteLoop, e.performer.PerformLoop, e.performer.RecoverLoop,
		e.performer.ProbeLoop}
	for _, loop := range loops {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	wg.Wait()
	return e.performer.Finish(ctx)
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
	for _, ch := range []string{ledger.ChannelEvents, ledger.ChannelActions} {
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
		case ledger.ChannelEvents:
			e.router.Wake()
		case ledger.ChannelActions:
			e.performer.Wake()
		}
	}
}
