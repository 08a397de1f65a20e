package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/batch"
)

// Notification channels: new events wake the router, new or due actions the performer.
const (
	channelEvents  = "oncehook_events"
	channelActions = "oncehook_actions"
)

// EngineParams configures the workers. Zero durations take the defaults.
type EngineParams struct {
	Pool        *pgxpool.Pool
	Config      *Config
	Clients     map[string]DestinationClient // each destination's client, by its name
	Logger      *slog.Logger
	Worker      string        // this process's name in leases; default host-pid-random
	Poll        time.Duration // fallback polling when no notification arrives; default 1s
	LeaseExtra  time.Duration // lease = destination timeout + this; default 30s
	BackoffBase time.Duration // first retry delay; default 2s
	BackoffMax  time.Duration // default 1h
	Concurrency int           // destination calls in flight; default 16
	Grace       time.Duration // how long in-flight calls may finish at shutdown; default 10s
	Metrics     *Metrics      // may be nil
	Now         func() time.Time
}

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
	if p.Worker == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		p.Worker = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if p.Poll <= 0 {
		p.Poll = time.Second
	}
	if p.LeaseExtra <= 0 {
		p.LeaseExtra = 30 * time.Second
	}
	if p.BackoffBase <= 0 {
		p.BackoffBase = 2 * time.Second
	}
	if p.BackoffMax <= 0 {
		p.BackoffMax = time.Hour
	}
	if p.Concurrency <= 0 {
		p.Concurrency = 16
	}
	if p.Grace <= 0 {
		p.Grace = 10 * time.Second
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.Now == nil {
		p.Now = time.Now
	}
	callable, fillNames := callsToStart(p.Config, p.Clients)
	limits := newLimits(p.Config, callable, p.Concurrency)
	performers := newWakeup(p.Pool, channelActions, p.Logger) // shared: calls from both fold together
	mode := &databaseMode{pool: p.Pool}
	e := &Engine{
		pool: p.Pool, logger: p.Logger, poll: p.Poll,
		router: &Router{pool: p.Pool, cfg: p.Config, logger: p.Logger, poll: p.Poll, mode: mode,
			wake: batch.NewSignal(), performers: performers,
			routes: rulesBySource(p.Config.Actions), paths: pathsBySource(p.Config.Actions)},
		performer: &Performer{
			p: p, pool: p.Pool, cfg: p.Config, logger: p.Logger, now: p.Now, mode: mode,
			callable: callable, fillNames: fillNames, limits: limits, limitedNames: limitedNames(limits),
			wake:       batch.NewSignal(),
			performers: performers,
			slots:      batch.NewSlots(p.Concurrency),
			claimed:    batch.NewSlots(p.Concurrency + extraClaims(p.Config, callable, limits, p.Concurrency)),
			unrecorded: batch.NewSlots(4 * p.Concurrency),
		},
	}
	e.performer.decisions = e.performer.newRecorder()
	e.router.lanes = newLanes(p.Config, p.Logger, func(ctx context.Context) ([]string, error) {
		return db.New(p.Pool).EventQueueClients(ctx)
	})
	e.performer.lanes = newLanes(p.Config, p.Logger, func(ctx context.Context) ([]string, error) {
		return db.New(p.Pool).ActionClientsWithWork(ctx)
	})
	return e
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
func (e *Engine) Worker() string { return e.performer.p.Worker }

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
			sleepCtx(ctx, e.poll)
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
			e.router.wake.Send()
		case channelActions:
			e.performer.wake.Send()
		}
	}
}

// loop runs step until it finds no work, then waits for a wake-up or the poll.
func loop(ctx context.Context, logger *slog.Logger, poll time.Duration, wakeCh <-chan struct{}, name string, step func(context.Context) (int, error)) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		n, err := step(ctx)
		if err != nil && ctx.Err() == nil {
			logger.Warn(name+" step failed", "err", err)
		}
		if n > 0 && err == nil {
			continue
		}
		timer.Reset(poll)
		select {
		case <-ctx.Done():
			return
		case <-wakeCh:
		case <-timer.C:
		}
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
