package store

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// The performer's claims. On one Postgres a claim, and a start of calls, is one
// statement that also writes the attempts it starts: an insert that selects from
// the actions it updated. Citus runs such an insert through the coordinator;
// there the actions are updated by one statement on the client's shard
// (ActionClaimSharded, ActionStartCallsSharded) and the attempts inserted by
// another (AttemptStartEach, one insert an attempt, sent together), in the
// claim's transaction.

// ClaimActions is ActionClaim, which reads the claimed rows by their keys alone:
// with the client a constant of that update, one Postgres planned it worse (see
// the query).
func (Single) ClaimActions(ctx context.Context, q *db.Queries, p db.ActionClaimParams) ([]db.ActionClaimRow, error) {
	p.Sharded = false
	return q.ActionClaim(ctx, p)
}

// ClaimActions is ActionClaimSharded, then AttemptStartEach for the claims that
// start a call.
func (Sharded) ClaimActions(ctx context.Context, q *db.Queries, p db.ActionClaimParams) ([]db.ActionClaimRow, error) {
	claimed, err := q.ActionClaimSharded(ctx, db.ActionClaimShardedParams{Callable: p.Callable, FillNames: p.FillNames,
		Client: p.Client, OnlyDestinations: p.OnlyDestinations, SkipDestinations: p.SkipDestinations,
		MaxActions: p.MaxActions, Worker: p.Worker, LeaseSeconds: p.LeaseSeconds})
	if err != nil {
		return nil, err
	}
	rows := make([]db.ActionClaimRow, len(claimed))
	var started []db.AttemptStartEachParams
	var startedRow []int
	for i, c := range claimed {
		rows[i] = db.ActionClaimRow(c)
		if c.Starts.Bool {
			started = append(started, callAttempt(c.Client, c.ID, c.RowsDay, ledger.SentKeyOf(c.AttemptKey, c.OperationKey), p.Worker))
			startedRow = append(startedRow, i)
		}
	}
	ids, err := startAttempts(ctx, q, started)
	for k, id := range ids {
		rows[startedRow[k]].AttemptID = id
	}
	return rows, err
}

// StartCalls is ActionStartCalls, in a transaction switched to lookups by key
// first (db.PlanByKey): the state is checked on each row found by its key.
func (Single) StartCalls(ctx context.Context, q *db.Queries, p db.ActionStartCallsParams) ([]db.ActionStartCallsRow, error) {
	if err := db.PlanByKey(ctx, q); err != nil {
		return nil, err
	}
	p.Sharded = false
	return q.ActionStartCalls(ctx, p)
}

// StartCalls is ActionStartCallsSharded, then AttemptStartEach.
func (Sharded) StartCalls(ctx context.Context, q *db.Queries, p db.ActionStartCallsParams) ([]db.ActionStartCallsRow, error) {
	counted, err := q.ActionStartCallsSharded(ctx, db.ActionStartCallsShardedParams{Worker: p.Worker, Client: p.Client,
		Clients: p.Clients, Ids: p.Ids})
	if err != nil {
		return nil, err
	}
	started := make([]db.AttemptStartEachParams, len(counted))
	for i, c := range counted {
		started[i] = callAttempt(c.Client, c.ID, c.RowsDay, ledger.SentKeyOf(c.AttemptKey, c.OperationKey), p.Worker)
	}
	ids, err := startAttempts(ctx, q, started)
	if err != nil {
		return nil, err
	}
	rows := make([]db.ActionStartCallsRow, len(counted))
	for i, c := range counted {
		rows[i] = db.ActionStartCallsRow{Client: c.Client, ID: c.ID, Attempts: c.Attempts,
			FirstAttemptAt: c.FirstAttemptAt, AttemptID: ids[i]}
	}
	return rows, nil
}

// callAttempt is the started call of an action, under the key the destination
// sees, in the partition of the action's rows.
func callAttempt(client string, id int64, rowsDay time.Time, sentKey, worker string) db.AttemptStartEachParams {
	return db.AttemptStartEachParams{Client: client, ActionID: id, Kind: "call", OperationKey: sentKey, Worker: worker,
		PartDay: rowsDay}
}

// startAttempts writes the attempts as started and returns their ids, in order.
func startAttempts(ctx context.Context, q *db.Queries, started []db.AttemptStartEachParams) ([]int64, error) {
	if len(started) == 0 {
		return nil, nil
	}
	ids := make([]int64, len(started))
	var first error
	q.AttemptStartEach(ctx, started).QueryRow(func(i int, id int64, err error) {
		if first == nil && err != nil {
			first = fmt.Errorf("write started attempts: %w", err)
		}
		ids[i] = id
	})
	return ids, first
}
