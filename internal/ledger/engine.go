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

// Router claims received events and inserts one action per business operation.
type Router struct {
	pool       *pgxpool.Pool
	cfg        *Config
	logger     *slog.Logger
	poll       time.Duration
	wake       batch.Signal
	performers *batch.Wakeup           // woken once a batch created actions
	lanes      *lanes                  // the clients it claims events for in turn
	routes     map[string][]ActionRule // each source's rules, predecessors first; the config does not change while it runs
	paths      map[string]*docPaths    // what each source's rules read of an event's document
}

// Performer claims due actions under a lease, calls their destinations and records
// each outcome through the decision table.
type Performer struct {
	p      EngineParams
	pool   *pgxpool.Pool
	cfg    *Config
	logger *slog.Logger
	now    func() time.Time

	wake       batch.Signal
	performers *batch.Wakeup // every process's performers, woken when outcomes make work due now
	slots      *batch.Slots  // one per call in flight
	claimed    *batch.Slots  // one per claimed action not answered yet (shared slots only)
	unrecorded *batch.Slots  // one per claimed action whose outcome is not yet recorded
	inflight   sync.WaitGroup
	decisions  *batch.Writer[pendingDecision, struct{}] // outcomes recorded together (newRecorder)
	lanes      *lanes                                   // the clients it claims actions for in turn
	modeMu     sync.Mutex
	mode       string // the database's mode once known (onCitus)

	// Derived from the config once: the config does not change while it runs.
	callable     []string              // destinations this process calls
	fillNames    []string              // rules whose params wait for a predecessor's result
	limits       map[string]*destLimit // destinations with limits of their own, by name
	limitedNames []string
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
	e := &Engine{
		pool: p.Pool, logger: p.Logger, poll: p.Poll,
		router: &Router{pool: p.Pool, cfg: p.Config, logger: p.Logger, poll: p.Poll,
			wake: batch.NewSignal(), performers: performers,
			routes: rulesBySource(p.Config.Actions), paths: pathsBySource(p.Config.Actions)},
		performer: &Performer{
			p: p, pool: p.Pool, cfg: p.Config, logger: p.Logger, now: p.Now,
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

// Routing runs in one loop per process: a second loop's inserts would contend with
// the first's for the same index pages. The loop waits a moment before a batch that
// may not fill, so that a wave of deliveries is routed by one transaction rather
// than by one each. After a full batch it takes larger ones, since a batch costs
// Postgres much the same whatever its size (planning, its commit), so a backlog
// drains in fewer transactions.
const (
	routeBatch       = 50
	routeBatchBehind = 200
)

func (rt *Router) routeLoop(ctx context.Context) {
	full := false
	loop(ctx, rt.logger, rt.poll, rt.wake, "route", func(ctx context.Context) (int, error) {
		if !full {
			sleepCtx(ctx, batch.RouteWait)
		}
		size := routeBatch
		if full {
			size = routeBatchBehind
		}
		n, err := rt.RouteBatch(ctx, size)
		full = n == size
		return n, err
	})
}

func (pf *Performer) performLoop(ctx context.Context) {
	loop(ctx, pf.logger, pf.p.Poll, pf.wake, "perform", pf.performBatch)
}

func (pf *Performer) recoverLoop(ctx context.Context) {
	tick := time.NewTicker(max(pf.p.LeaseExtra/3, 100*time.Millisecond))
	defer tick.Stop()
	for {
		if _, err := pf.RecoverLeases(ctx); err != nil && ctx.Err() == nil {
			pf.logger.Warn("recover expired leases", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
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
