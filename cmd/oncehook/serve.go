package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/web"
)

const serveUsage = `Usage: oncehook serve --config FILE [--data-dir DIR]

Runs the HTTP server (webhooks, dashboard, JSON API) and the workers.
DATABASE_URL selects Postgres; without it an embedded Postgres starts under
--data-dir (default .oncehook/pg) and stops when oncehook exits.

On SIGINT or SIGTERM it stops accepting requests, lets destination calls in
flight finish within a grace period, hands back its unstarted claims, and
stops the embedded Postgres last.
`

const workerUsage = `Usage: oncehook worker --config FILE [--data-dir DIR]

Runs the workers only (routing, performing, reconciling, lease recovery), for
scaling out beside one or more 'oncehook serve' processes on the same database.
`

func runServe(ctx context.Context, env *environment, args []string) error {
	return runProcess(ctx, env, args, "serve", serveUsage, true)
}

func runWorker(ctx context.Context, env *environment, args []string) error {
	return runProcess(ctx, env, args, "worker", workerUsage, false)
}

// runProcess is serve (withHTTP) or worker: config, database, engine, and for serve
// the HTTP server; everything stops in reverse order.
func runProcess(ctx context.Context, env *environment, args []string, name, usage string, withHTTP bool) error {
	fs := newFlags(env, name, usage)
	var df dbFlags
	df.register(fs, env)
	configPath := fs.String("config", "oncehook.yaml", "config file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := oncehook.LoadConfig(*configPath, env.getenv)
	if err != nil {
		return err
	}
	logger := newLogger(env)
	d, err := openDatabase(ctx, env, df, logger, 16)
	if err != nil {
		return err
	}
	defer d.Close(context.WithoutCancel(ctx), logger)

	clients := oncehook.NewDestinationClients(cfg)
	metrics := oncehook.NewMetrics(d.Pool)
	engine := oncehook.NewEngine(oncehook.EngineParams{Pool: d.Pool, Config: cfg, Destinations: clients,
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
	if withHTTP {
		wg.Add(2)
		go func() { defer wg.Done(); pruneEvery(engineCtx, d.Pool, cfg, logger) }()
		go func() { defer wg.Done(); oncehook.NewNotifier(d.Pool, cfg, logger).Run(engineCtx) }()
	}

	var srv *http.Server
	errc := make(chan error, 1)
	if withHTTP {
		e := web.New(web.Params{Config: cfg, Pool: d.Pool, Inbox: oncehook.NewInbox(d.Pool, logger),
			Review: oncehook.NewReview(d.Pool, cfg, clients), Logger: logger,
			Metrics: metrics, MetricsToken: env.getenv("ONCEHOOK_METRICS_TOKEN")})
		ln, err := net.Listen("tcp", cfg.Listen)
		if err != nil {
			stopEngine()
			wg.Wait()
			return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
		}
		srv = &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
		go func() { errc <- srv.Serve(ln) }()
		logger.Info("listening", "addr", ln.Addr().String())
		fmt.Fprintf(env.stdout, "oncehook listening on http://%s\n", ln.Addr())
	}

	var runErr error
	select {
	case err := <-errc:
		runErr = fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	if srv != nil {
		shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("http shutdown", "err", err)
		}
		cancel()
	}
	stopEngine()
	wg.Wait()
	return runErr
}
