package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WithSessionLock runs fn on one connection of pool that holds the session-level
// advisory lock key, and releases the lock after: it keeps two processes apart for
// a long job without holding a transaction open, and goes with the session if the
// process dies. With wait it waits for the lock; without, it reports false at once
// when another session holds it, and fn does not run.
func WithSessionLock(ctx context.Context, pool *pgxpool.Pool, key int64, wait bool, fn func(q *Queries) error) (bool, error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return false, fmt.Errorf("acquire a connection for lock %d: %w", key, err)
	}
	defer conn.Release()
	take := "SELECT pg_try_advisory_lock($1)"
	if wait {
		take = "SELECT pg_advisory_lock($1) IS NOT NULL"
	}
	var locked bool
	if err := conn.QueryRow(ctx, take, key).Scan(&locked); err != nil {
		return false, fmt.Errorf("take lock %d: %w", key, err)
	}
	if !locked {
		return false, nil
	}
	defer conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", key) //nolint:errcheck // released with the session anyway
	return true, fn(New(conn))
}
