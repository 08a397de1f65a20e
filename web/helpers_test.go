package web_test

import (
	"context"
	"io"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

func ioPipe() (*io.PipeReader, *io.PipeWriter) { return io.Pipe() }

// openPool is a small pool of the test's own on dsn, as oncehook serve opens one.
func openPool(t *testing.T, dsn string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pool.Ping(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}
