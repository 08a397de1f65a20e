package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/telemetry"
)

// dbFlags are the flags every command that reaches the database accepts.
type dbFlags struct {
	dataDir string
}

func (f *dbFlags) register(fs *flag.FlagSet, env *environment) {
	def := env.getenv("ONCEHOOK_DATA_DIR")
	if def == "" {
		def = ".oncehook/pg"
	}
	fs.StringVar(&f.dataDir, "data-dir", def, "embedded Postgres data directory when DATABASE_URL is unset (env ONCEHOOK_DATA_DIR)")
}

// database is an open pool plus whatever must be stopped after it closes.
type database struct {
	Pool     *pgxpool.Pool
	DSN      string
	Mode     string // DatabaseMode: single, citus or citus-undistributed
	embedded *db.Embedded
}

// openDatabase connects to DATABASE_URL or, without it, to the embedded Postgres
// (starting it unless another oncehook process already runs it), then migrates.
func openDatabase(ctx context.Context, env *environment, f dbFlags, logger *slog.Logger, maxConns int32) (*database, error) {
	d := &database{DSN: env.getenv("DATABASE_URL")}
	if d.DSN == "" {
		emb, err := db.StartEmbedded(ctx, db.EmbeddedParams{Dir: f.dataDir, Logger: logger})
		if err != nil {
			return nil, err
		}
		d.embedded = emb
		d.DSN = emb.DSN("oncehook")
		if emb.Owned() {
			logger.Info("embedded postgres started", "dir", emb.Dir())
		} else {
			logger.Info("embedded postgres already running; using it", "dir", emb.Dir())
		}
	}
	if err := db.Migrate(ctx, d.DSN); err != nil {
		d.Close(context.WithoutCancel(ctx), logger)
		return nil, err
	}
	pool, err := db.Open(ctx, d.DSN, maxConns)
	if err != nil {
		d.Close(context.WithoutCancel(ctx), logger)
		return nil, err
	}
	d.Pool = pool
	if d.Mode, err = db.New(pool).DatabaseMode(ctx); err != nil {
		d.Close(context.WithoutCancel(ctx), logger)
		return nil, fmt.Errorf("read the database's mode: %w", err)
	}
	logger.Info("database mode: "+modeLine(d.Mode), "mode", d.Mode)
	return d, nil
}

// withDatabase is openDatabase for the short commands: a small pool, fn, then the
// pool closed and the embedded Postgres stopped if this command started it.
func withDatabase(ctx context.Context, env *environment, df dbFlags, fn func(d *database) error) error {
	logger := newLogger(env)
	d, err := openDatabase(ctx, env, df, logger, 2)
	if err != nil {
		return err
	}
	defer d.Close(context.WithoutCancel(ctx), logger)
	return fn(d)
}

// Close closes the pool, then stops the embedded Postgres if this process started it.
func (d *database) Close(ctx context.Context, logger *slog.Logger) {
	if d.Pool != nil {
		d.Pool.Close()
	}
	if d.embedded != nil && d.embedded.Owned() {
		if err := d.embedded.Stop(ctx); err != nil {
			logger.Error("stop embedded postgres", "err", err)
			return
		}
		logger.Info("embedded postgres stopped")
	}
}

// newLogger builds the process logger from ONCEHOOK_LOG_LEVEL (debug, info, warn,
// error; default info) and ONCEHOOK_LOG_FORMAT (text or json; default text). An
// unknown value falls back to the default and says so, rather than refusing to start.
func newLogger(env *environment) *slog.Logger { return newLoggerTo(env, env.stderr) }

// newLoggerTo is newLogger writing to w.
func newLoggerTo(env *environment, w io.Writer) *slog.Logger {
	var level slog.Level
	levelText := env.getenv("ONCEHOOK_LOG_LEVEL")
	badLevel := levelText != "" && level.UnmarshalText([]byte(levelText)) != nil
	opts := &slog.HandlerOptions{Level: level}
	var logger *slog.Logger
	switch format := env.getenv("ONCEHOOK_LOG_FORMAT"); format {
	case "json":
		logger = slog.New(telemetry.LogHandler(slog.NewJSONHandler(w, opts)))
	default:
		logger = slog.New(telemetry.LogHandler(slog.NewTextHandler(w, opts)))
		if format != "" && format != "text" {
			logger.Warn("unknown ONCEHOOK_LOG_FORMAT; using text", "value", format)
		}
	}
	if badLevel {
		logger.Warn("unknown ONCEHOOK_LOG_LEVEL; using info", "value", levelText)
	}
	return logger
}
