package oncehook

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
)

// Notification channels: new events wake the router, new or due actions the performer.
const (
	channelEvents  = "oncehook_events"
	channelActions = "oncehook_actions"
)

// EngineParams configures the workers. Zero durations take the defaults.
type EngineParams struct {
	Pool         *pgxpool.Pool
	Config       *Config
	Destinations map[string]DestinationClient // by name
	Logger       *slog.Logger
	Worker       string        // this process's name in leases; default host-pid-random
	Poll         time.Duration // fallback polling when no notification arrives; default 1s
	LeaseExtra   time.Duration // lease = destination timeout + this; default 30s
	BackoffBase  time.Duration // first retry delay; default 2s
	BackoffMax   time.Duration // default 1h
	Concurrency  int           // destination calls in flight; default 16
	Grace        time.Duration // how long in-flight calls may finish at shutdown; default 10s
	Metrics      *Metrics      // may be nil
	Now          func() time.Time
}

// Engine routes events into actions, performs them and reconciles what is uncertain.
// Every process runs one; they coordinate only through Postgres.
type Engine struct {
	p      EngineParams
	pool   *pgxpool.Pool
	cfg    *Config
	logger *slog.Logger
	now    func() time.Time

	routeWake   chan struct{}
	performWake chan struct{}
	slots       chan struct{} // one token per call in flight
	unrecorded  chan struct{} // one token per claimed action whose outcome is not yet recorded
	inflight    sync.WaitGroup
	decisions   decisionGroups // outcomes waiting to be recorded together

	// Derived from the config once: the config does not change while an engine runs.
	routes    map[string][]ActionRule // each source's rules, predecessors first
	callable  []string                // destinations this process calls
	fillNames []string                // rules whose params wait for a predecessor's result
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
	callable, fillNames := callsToStart(p.Config, p.Destinations)
	return &Engine{
		p: p, pool: p.Pool, cfg: p.Config, logger: p.Logger, now: p.Now,
		routes: rulesBySource(p.Config.Actions), callable: callable, fillNames: fillNames,
		routeWake:   make(chan struct{}, 1),
		performWake: make(chan struct{}, 1),
		slots:       make(chan struct{}, p.Concurrency),
		unrecorded:  make(chan struct{}, 4*p.Concurrency),
	}
}

// Worker is the name this engine writes into leases and attempts.
func (e *Engine) Worker() string { return e.p.Worker }

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Run routes, performs, reconciles and recovers until ctx ends, then lets calls in
// flight finish within the grace period and hands back the claims it never started.
func (e *Engine) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	loops := []func(context.Context){e.listenLoop, e.routeLoop, e.performLoop, e.recoverLoop}
	for _, loop := range loops {
		wg.Add(1)
		go func() { defer wg.Done(); loop(ctx) }()
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { e.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(e.p.Grace):
		e.logger.Warn("calls still in flight after the grace period; their started attempts will be reconciled")
	}
	releaseCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return e.releaseLeases(releaseCtx)
}

// listenLoop turns Postgres notifications into wake-ups; polling covers its gaps.
func (e *Engine) listenLoop(ctx context.Context) {
	for ctx.Err() == nil {
		if err := e.listen(ctx); err != nil && ctx.Err() == nil {
			e.logger.Debug("listen for notifications", "err", err)
			sleepCtx(ctx, e.p.Poll)
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
			wake(e.routeWake)
		case channelActions:
			wake(e.performWake)
		}
	}
}

// Routing runs in one loop per process. A second loop measured slower (make bench,
// end to end): its inserts contend with the first's for the same index pages. The
// loop waits a moment before a batch that may not fill, so that a wave of
// deliveries is routed by one transaction rather than by one each.
const (
	routeBatch  = 50
	routeGather = 5 * time.Millisecond
)

func (e *Engine) routeLoop(ctx context.Context) {
	full := false
	e.loop(ctx, e.routeWake, "route", func(ctx context.Context) (int, error) {
		if !full {
			sleepCtx(ctx, routeGather)
		}
		n, err := e.RouteBatch(ctx, routeBatch)
		full = n == routeBatch
		return n, err
	})
}

func (e *Engine) performLoop(ctx context.Context) {
	e.loop(ctx, e.performWake, "perform", e.performBatch)
}

func (e *Engine) recoverLoop(ctx context.Context) {
	tick := time.NewTicker(max(e.p.LeaseExtra/3, 100*time.Millisecond))
	defer tick.Stop()
	for {
		if _, err := e.RecoverLeases(ctx); err != nil && ctx.Err() == nil {
			e.logger.Warn("recover expired leases", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// loop runs step until it finds no work, then waits for a wake-up or the poll.
func (e *Engine) loop(ctx context.Context, wakeCh chan struct{}, name string, step func(context.Context) (int, error)) {
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		n, err := step(ctx)
		if err != nil && ctx.Err() == nil {
			e.logger.Warn(name+" step failed", "err", err)
		}
		if n > 0 && err == nil {
			continue
		}
		timer.Reset(e.p.Poll)
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
