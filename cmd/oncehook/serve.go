package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/oncehook/oncehook"
	"github.com/oncehook/oncehook/web"
)

const serveUsage = `Usage: oncehook serve --config FILE [--data-dir DIR]

Runs the HTTP server (webhooks, dashboard, JSON API) and the workers.
DATABASE_URL selects Postgres; without it an embedded Postgres starts under
--data-dir (default .oncehook/pg) and stops when oncehook exits.
`

func runServe(ctx context.Context, env *environment, args []string) error {
	fs := newFlags(env, "serve", serveUsage)
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

	e := web.New(web.Params{Config: cfg, Pool: d.Pool, Inbox: oncehook.NewInbox(d.Pool, logger), Logger: logger})
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	srv := &http.Server{Handler: e, ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	logger.Info("listening", "addr", ln.Addr().String())
	fmt.Fprintf(env.stdout, "oncehook listening on http://%s\n", ln.Addr())

	select {
	case err := <-errc:
		return fmt.Errorf("serve http: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down")
	shutCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 20*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		logger.Error("http shutdown", "err", err)
	}
	return nil
}
