// Package db is oncehook's storage: sqlc-generated queries over pgx, the transaction
// helper, the migrations runner and the embedded Postgres launcher.
package db

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/internal/telemetry"
)

// Open returns a small pool on dsn and checks that the server answers. A 2-core
// Postgres gives the most throughput with about 16 connections; more only queue.
func Open(ctx context.Context, dsn string, maxConns int32) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		return nil, fmt.Errorf("parse database url: %w", err)
	}
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	// Postgres's JIT compiles a statement whose estimated cost is high, which
	// at millions of rows many of the dashboard's index walks are; compiling
	// took 94 ms of a 135 ms read of the trends at ten million actions that found
	// nothing. Every statement here is a short walk or write: off, unless the
	// URL asks for it (jit=on).
	if _, set := cfg.ConnConfig.RuntimeParams["jit"]; !set {
		cfg.ConnConfig.RuntimeParams["jit"] = "off"
	}
	cfg.ConnConfig.Tracer = telemetry.QueryTracer{} // spans for statements of a traced request
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	pingCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pingCtx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("reach database: %w", err)
	}
	return pool, nil
}

// Beginner is what WithTx needs: a pool, a connection, or a transaction (for a
// savepoint).
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// WithTx runs fn in a plain transaction, or a savepoint of b's when b is one,
// and commits it when fn returns nil. The caller owns the transaction's scope, so
// keep fn short and never call a destination in it. A transaction planned
// otherwise is InTx's.
func WithTx(ctx context.Context, b Beginner, fn func(q *Queries) error) error {
	tx, err := b.Begin(ctx)
	if err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if err := fn(New(tx)); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}
