package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// PlannedPerCall wraps a pool or a transaction so that Postgres plans each statement
// sent through it for that call's own arguments, instead of reusing the generic
// plan of the connection's prepared statement.
//
// A generic plan is made once per connection, for the table sizes of that moment,
// and kept until statistics change. A statement that updates a batch of rows named
// by arrays (unnest) is planned for a table of a few rows when the service starts on
// a new database, and that plan would stay in use while the table grows. Planned per
// call, the statement sees how many rows the arrays hold and how large the tables
// are now. Planning costs CPU, so only statements that need it go through here.
//
// The statement's description (parameter and result types) is still cached per
// connection: pgx's QueryExecModeCacheDescribe sends it as an unnamed statement.
// A batch sent through it (sqlc's :batch queries) keeps the connection's mode,
// prepared statements with kept plans (pgx has no mode for a batch): only
// statements of one row each, which a kept plan serves as well, are sent so.
func PlannedPerCall(d DBTX) DBTX { return perCall{d} }

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

// TxBeginner begins a transaction with options: a pool or a connection.
type TxBeginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// IndexPlanned is a transaction whose statements reuse the generic plan of the
// connection's prepared statement, made with index paths and nested loops only
// (the transaction's BEGIN sets that, in the same round trip).
//
// It is for the performer's claim of due actions, which runs many times a second
// and reads the head of one index and a few rows by key, so planning each call
// would be a large part of its cost. A generic plan is made without the call's
// arguments, for the table sizes of its moment, and a new database's tables are
// empty then; with sequential scans, bitmap scans, sorts, hash and merge joins
// priced out, what is left reads the queue from the head of actions_due_idx and
// each row by its key, whatever the sizes. A statement run this way must not need
// a sort (the whole plan is then priced out, and anything goes), nor filter the
// rows it looks up by key with conditions a whole index could serve: on a small
// table a full scan of an index with that filter looks cheaper than ten lookups by
// key, and the plan keeps it as the table grows. So the router's statements (which
// keep their input's order) stay planned per call, and the record statement (whose
// plan, made on a table of 100 rows, walked an index of every action, or every
// claimed action, for each outcome) runs KeyPlanned.
var IndexPlanned = Plan{begin: indexPlannedBegin}

// PerCall is a transaction whose statements are planned for each call's own
// arguments (as PlannedPerCall).
var PerCall = Plan{perCall: true}

const indexPlannedBegin = "BEGIN; SET LOCAL plan_cache_mode = force_generic_plan; " +
	"SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off; " +
	"SET LOCAL enable_hashjoin = off; SET LOCAL enable_mergejoin = off"

// KeyPlanned is a transaction whose statements reuse the generic plan of the
// connection's prepared statement, made with lookups by key only:
// sequential scans, index scans (bitmap scans stay), sorts, hash and merge joins are
// priced out (the transaction's BEGIN sets that, in the same round trip).
//
// It is for the performer's record of outcomes, a statement that updates a batch of
// rows named by arrays (unnest) and runs many times a second, so planning each call
// would be a large part of its cost. An index scan
// can read a whole index in its order, which a generic plan made on a table of a
// hundred rows takes to be cheaper than a lookup per row; a bitmap scan reads what
// a condition selects, so with the keys it joins on as a statement's only
// conditions, what is left looks each row up by its key whatever the sizes. Such a
// statement must give an index nothing else to read by: no condition on a
// constant that an index could answer (it tests those with IS TRUE, which no index
// answers), and no join to a table through a partial index whose predicate the
// join implies (a bitmap scan of such an index needs no condition, and reads all
// of it): it looks those rows up in a subquery per row (OFFSET 0). ActionRecordBatch
// does both; TestPerformerRecordPlanLooksUpEachActionByKey checks its kept plan.
var KeyPlanned = Plan{begin: "BEGIN; " + keyPlannedSettings}

const keyPlannedSettings = "SET LOCAL plan_cache_mode = force_generic_plan; " +
	"SET LOCAL enable_seqscan = off; SET LOCAL enable_indexscan = off; SET LOCAL enable_indexonlyscan = off; " +
	"SET LOCAL enable_bitmapscan = on; SET LOCAL enable_sort = off; SET LOCAL enable_hashjoin = off; " +
	"SET LOCAL enable_mergejoin = off"

// PlanByKey switches the rest of q's transaction to KeyPlanned's settings,
// for a statement of lookups by key that runs after one that reads an index in its
// order (the performer's ActionStartCalls after its claim, in the claim's
// transaction, IndexPlanned). A generic plan is made under the
// settings of its first run on a connection and kept, so a statement must always
// run under the same ones.
func PlanByKey(ctx context.Context, q *Queries) error {
	if _, err := q.db.Exec(ctx, keyPlannedSettings); err != nil {
		return fmt.Errorf("plan by key: %w", err)
	}
	return nil
}

// ScanFree is a transaction whose statements are planned with sequential scans
// priced out (BEGIN sets enable_seqscan off, in the same round trip), each for
// its own arguments (as PlannedPerCall).
//
// It is for the router, whose every statement reads rows by key or the head of
// event_queue in id order. The queue is emptied as fast as it fills, so autovacuum
// may analyze it while it is empty but still has pages: Postgres then takes it to
// hold one row whatever it holds later, and claims the queue's head by scanning and
// sorting the whole queue until the next analyze. With sequential scans priced out, the
// only other path is the one the claim needs, the queue's index from its head; a
// statement with no index to use is planned as before.
var ScanFree = Plan{begin: scanFreeBegin, perCall: true}

const scanFreeBegin = "BEGIN; SET LOCAL enable_seqscan = off"

// Plan is how the statements of a transaction are planned: the planner settings
// its BEGIN sets, and whether each statement is planned for its own arguments.
// The zero Plan is a plain transaction, as WithTx begins.
type Plan struct {
	begin   string // the BEGIN that also sets the planner's settings; "" for a plain one
	perCall bool   // each statement planned for its call (PlannedPerCall)
}

// Begin begins a transaction as plan says, and returns it with the queries
// that run in it. The caller commits or rolls it back.
func Begin(ctx context.Context, b TxBeginner, plan Plan) (pgx.Tx, *Queries, error) {
	tx, err := b.BeginTx(ctx, pgx.TxOptions{BeginQuery: plan.begin})
	if err != nil {
		return nil, nil, fmt.Errorf("begin transaction: %w", err)
	}
	var d DBTX = tx
	if plan.perCall {
		d = PlannedPerCall(tx)
	}
	return tx, New(d), nil
}

// InTx runs fn in a transaction begun as plan says (Begin), and commits it when
// fn returns nil. Keep fn short, and never call a destination in it.
func InTx(ctx context.Context, b TxBeginner, plan Plan, fn func(q *Queries) error) error {
	tx, q, err := Begin(ctx, b, plan)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx)) //nolint:errcheck // no-op after commit
	if err := fn(q); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit transaction: %w", err)
	}
	return nil
}
