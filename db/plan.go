package db

import (
	"context"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PlannedPerCall wraps a pool or a transaction so that Postgres plans each statement
// sent through it for that call's own arguments, instead of reusing the generic
// plan of the connection's prepared statement.
//
// A generic plan is made once per connection, for the table sizes of that moment,
// and kept until statistics change. The statements that update a batch of rows
// named by arrays (unnest) are planned for a table of a few rows when the service
// starts on a new database, and that plan (a sequential scan, or a bitmap scan of
// a partial index full of dead entries) stays in use while the table grows, for
// as long as autovacuum takes to analyze it: in the bench each record statement
// (ActionRecordBatch) took 5 to 15 ms instead of well under one. Planned per call,
// the statement sees how many rows the arrays hold and how large the tables are
// now. Planning costs a little CPU, so only the statement seen to need it goes
// through here; auto_explain (bench -cpuprofile -keep) shows which others would.
//
// The statement's description (parameter and result types) is still cached per
// connection: pgx's QueryExecModeCacheDescribe sends it as an unnamed statement.
func PlannedPerCall(d DBTX) DBTX { return perCall{d} }

// WithTxPlannedPerCall is WithTx with every statement of fn planned per call.
func WithTxPlannedPerCall(ctx context.Context, b Beginner, fn func(q *Queries) error) error {
	return withTx(ctx, b, PlannedPerCall, fn)
}

type perCall struct{ DBTX }

func (p perCall) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	return p.DBTX.Exec(ctx, sql, withMode(args)...)
}

func (p perCall) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	return p.DBTX.Query(ctx, sql, withMode(args)...)
}

func (p perCall) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	return p.DBTX.QueryRow(ctx, sql, withMode(args)...)
}

func withMode(args []any) []any {
	return append([]any{pgx.QueryExecModeCacheDescribe}, args...)
}
