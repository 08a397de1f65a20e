package performer

import (
	"context"
	"fmt"

	"github.com/oncehook/oncehook/db"
)

// The performer's claims on Citus. ActionClaim and ActionStartCalls write the
// attempts they start with an insert that selects from the actions they updated,
// which Citus runs through the coordinator; there the actions are updated by one
// statement (ActionClaimSharded, ActionStartCallsSharded) and the attempts
// inserted by another (AttemptStartEach, one insert an attempt sent together),
// each on the client's shard, in the claim's transaction.

// actionClaim runs ActionClaim, or on Citus (p.Sharded) its two statements.
func actionClaim(ctx context.Context, q *db.Queries, p db.ActionClaimParams) ([]db.ActionClaimRow, error) {
	if !p.Sharded {
		return q.ActionClaim(ctx, p)
	}
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
			started = append(started, callAttempt(c.Client, c.ID, c.AttemptKey, c.OperationKey, p.Worker))
			startedRow = append(startedRow, i)
		}
	}
	ids, err := attemptsStart(ctx, q, started)
	for k, id := range ids {
		rows[startedRow[k]].AttemptID = id
	}
	return rows, err
}

// actionStartCalls runs ActionStartCalls, or on Citus (p.Sharded) its two
// statements.
func actionStartCalls(ctx context.Context, q *db.Queries, p db.ActionStartCallsParams) ([]db.ActionStartCallsRow, error) {
	if !p.Sharded {
		return q.ActionStartCalls(ctx, p)
	}
	counted, err := q.ActionStartCallsSharded(ctx, db.ActionStartCallsShardedParams{Worker: p.Worker, Client: p.Client,
		Clients: p.Clients, Ids: p.Ids})
	if err != nil {
		return nil, err
	}
	started := make([]db.AttemptStartEachParams, len(counted))
	for i, c := range counted {
		started[i] = callAttempt(c.Client, c.ID, "", c.OperationKey, p.Worker)
	}
	ids, err := attemptsStart(ctx, q, started)
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

// callAttempt is the started call of an action: under its attempt key when it has
// one, else its operation key (ActionClaim's attempt).
func callAttempt(client string, id int64, attemptKey, operationKey, worker string) db.AttemptStartEachParams {
	if attemptKey != "" {
		operationKey = attemptKey
	}
	return db.AttemptStartEachParams{Client: client, ActionID: id, Kind: "call", OperationKey: operationKey, Worker: worker}
}

// attemptsStart writes the attempts as started and returns their ids, in order.
func attemptsStart(ctx context.Context, q *db.Queries, started []db.AttemptStartEachParams) ([]int64, error) {
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
