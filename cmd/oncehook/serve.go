package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/alerts"
	"github.com/oncehook/oncehook/internal/backfill"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/notify"
	"github.com/oncehook/oncehook/internal/oauthstore"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/telemetry"
	"github.com/oncehook/oncehook/web"
)

const serveUsage = `Usage: oncehook serve --config FILE [--data-dir DIR] [--cpuprofile FILE]

Runs the HTTP server (webhooks, dashboard, JSON API) and the workers.
PORT, when set, overrides the config's listen: the server listens on that
port on every interface (as container platforms expect).
DATABASE_URL selects Postgres; without it an embedded Postgres starts under
--data-dir (default .oncehook/pg) and stops when oncehook exits.

On SIGINT or SIGTERM it stops accepting requests, lets destination calls in
flight finish within a grace period, hands back its unstarted claims, and
stops the embedded Postgres last. --cpuprofile FILE writes a CPU profile of
the process until then, for go tool pprof.
`

const workerUsage = `Usage: oncehook worker --config FILE [--data-dir DIR] [--metrics ADDR] [--cpuprofile FILE]

Runs the workers only (routing, performing, reconciling, lease recovery), for
scaling out beside one or more 'oncehook serve' processes on the same database.
--metrics ADDR serves this process's /metrics, /healthz and /readyz on ADDR
(e.g. 127.0.0.1:9100).
`

func runServe(ctx context.Context, env *environment, args []string) error {
	return runProcess(ctx, env, args, "serve", serveUsage, true)
}

func runWorker(ctx context.Context, env *environment, args []string) error {
	return runProcess(ctx, env, args, "worker", workerUsage, false)
}

// runProcess is serve (withHTTP) or worker: config, database, then the services.
func runProcess(ctx context.Context, env *environment, args []string, name, usage string, withHTTP bool) error {
	fs := newFlags(env, name, usage)
	var df dbFlags
	df.register(fs, env)
	configPath := fs.String("config", "oncehook.yaml", "config file")
	var metricsAddr *string
	if !withHTTP {
		metricsAddr = fs.String("metrics", "", "serve /metrics, /healthz and /readyz on this address (workers have no other HTTP server)")
	}
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of this process to FILE until it stops (for go tool pprof)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := config.Load(*configPath, env.getenv)
	if err != nil {
		return err
	}
	if err := config.ListenOnPort(cfg, env.getenv(config.PortEnv)); err != nil {
		return err
	}
	if *cpuProfile != "" {
		stop, err := startCPUProfile(*cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	tuneGC()
	logger := newLogger(env)
	stopTraces, err := telemetry.Setup(ctx, env.getenv)
	if err != nil {
		return err
	}
	defer flushTraces(ctx, stopTraces, logger)
	d, err := openDatabase(ctx, env, df, logger, 16)
	if err != nil {
		return err
	}
	defer d.Close(context.WithoutCancel(ctx), logger)
	opts := services{http: withHTTP}
	if metricsAddr != nil {
		opts.metricsAddr = *metricsAddr
	}
	opts.onListening = func(addr string) {
		fmt.Fprintf(env.stdout, "oncehook listening on http://%s\n", addr)
	}
	return runServices(ctx, env, cfg, d, logger, opts)
}

// services says what runServices runs besides the workers.
type services struct {
	http        bool              // the HTTP server, pruning and owner digests
	metricsAddr string            // workers only: where to serve /metrics, if anywhere
	onListening func(addr string) // called once the server accepts connections
}

// runServices runs the workers and, for serve, the HTTP server until ctx ends, then
// stops them in reverse order: no new requests, calls in flight finish within the
// grace period, claims never started are handed back. The caller closes d last.
func runServices(ctx context.Context, env *environment, cfg *settings.Config, d *database, logger *slog.Logger, opts services) error {
	clients := destination.NewClients(cfg)
	metrics := metrics.New(d.Pool)
	tokens, err := oauthstore.OpenTokens(ctx, d.Pool, cfg)
	if err != nil {
		return err
	}
	destination.UseOAuth(clients, cfg, tokens, metrics)
	engine := engine.New(engine.Params{Pool: d.Pool, Config: cfg, Clients: clients,
		Logger: logger, Metrics: metrics})
	engineCtx, stopEngine := context.WithCancel(context.WithoutCancel(ctx))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := engine.Run(engineCtx); err != nil {
			logger.Error("workers stopped", "err", err)
		}
	}()
	logger.Info("workers started", "worker", engine.Worker())
	// The outages' alerts, sent by every process (one takes each).
	sender := alerts.New(alerts.Params{Pool: d.Pool, Config: cfg, Logger: logger})
	wg.Add(1)
	go func() { defer wg.Done(); sender.Run(engineCtx) }()
	stopWorkers := func() { stopEngine(); wg.Wait() }
	if !opts.http {
		return runAsWorker(ctx, env, opts.metricsAddr, d, metrics, logger, stopWorkers)
	}
	wg.Add(4)
	go func() { defer wg.Done(); pruneEvery(engineCtx, d.Pool, cfg, logger) }()
	// The days' partitions the inbox writes into, made ahead now and every hour;
	// the bodies of events stored before them move in while the server serves.
	go func() { defer wg.Done(); partitions.Keep(engineCtx, db.New(d.Pool), logger) }()
	go func() { defer wg.Done(); moveOldBodies(engineCtx, d.Pool, logger) }()
	notifier := notify.New(notify.Params{Pool: d.Pool, Config: cfg,
		Mail: destination.NewSMTP(cfg.Notify.SMTP.Destination()), Logger: logger})
	go func() { defer wg.Done(); notifier.Run(engineCtx) }()

	inbox := inbox.New(d.Pool, logger, metrics)
	defer inbox.Close() // after the HTTP server: flush the last group commit
	// Backfill passes store through the inbox; the lease in the database keeps one
	// pass per source at a time however many servers run.
	backfiller := backfill.New(backfill.Params{Pool: d.Pool, Config: cfg, Inbox: inbox,
		Clients: provider.NewBackfillClients(cfg), Logger: logger, Metrics: metrics})
	wg.Add(1)
	go func() { defer wg.Done(); _ = backfiller.Run(engineCtx) }()
	review := review.New(d.Pool, cfg, clients)
	wg.Add(1)
	go func() { defer wg.Done(); countTrendsEvery(engineCtx, review, logger) }()
	e := web.New(web.Params{Config: cfg, Pool: d.Pool, Inbox: inbox,
		Review: review, Logger: logger,
		Metrics: metrics, MetricsToken: env.getenv("ONCEHOOK_METRICS_TOKEN")})
	runErr := serveHTTP(ctx, cfg, e, logger, opts.onListening)
	stopWorkers()
	return runErr
}

// runAsWorker serves /metrics, /healthz and /readyz on metricsAddr, if given, until
// ctx ends, then calls stopWorkers, and stops serving after the workers have stopped.
func runAsWorker(ctx context.Context, env *environment, metricsAddr string, d *database, metrics *metrics.Metrics,
	logger *slog.Logger, stopWorkers func()) error {
	if metricsAddr != "" {
		h := web.WorkerHandler(d.Pool, web.MetricsHandler(metrics, env.getenv("ONCEHOOK_METRICS_TOKEN")))
		stopMetrics, err := serveWorkerMetrics(metricsAddr, h, logger)
		if err != nil {
			stopWorkers()
			return err
		}
		defer stopMetrics()
	}
	<-ctx.Done()
	logger.Info("shutting down")
	stopWorkers()
	return nil
}

// serveHTTP serves h on cfg.Listen until ctx ends or the server fails, then shuts
// it down, letting requests in flight finish for up to 10 s. The server's
// timeouts are web's; an address may hold cfg.ConnectionsPerAddress connections.
func serveHTTP(ctx context.Context, cfg *settings.Config, h http.Handler, logger *slog.Logger, onListening func(string)) error {
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	ln = web.LimitListener(ln, cfg.ConnectionsPerAddress, cfg.Trusted)
	srv := web.NewHTTPServer(h)
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String())
	if onListening != nil {
		onListening(ln.Addr().String())
	}
	var runErr error
	select {
	case err := <-errc:
		runErr = fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("http shutdown", "err", err)
	}
	return runErr
}

// serveWorkerMetrics serves a worker process's h (metrics and probes) on addr.
func serveWorkerMetrics(addr string, h http.Handler, logger *slog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for metrics on %s: %w", addr, err)
	}
	srv := web.NewHTTPServer(h)
	go srv.Serve(ln) //nolint:errcheck // closed by stop
	logger.Info("metrics listening", "addr", ln.Addr().String())
	return func() { srv.Close() }, nil
}

// flushTraces sends the spans still buffered, for up to 5 s, once the process stops.
func flushTraces(ctx context.Context, stop func(context.Context) error, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := stop(ctx); err != nil {
		logger.Warn("flush traces", "err", err)
	}
}
