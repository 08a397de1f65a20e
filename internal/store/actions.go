package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// InsertActions is ActionInsert: one statement for the batch.
func (Single) InsertActions(ctx context.Context, q *db.Queries, p db.ActionInsertParams) ([]db.ActionInsertRow, error) {
	return q.ActionInsert(ctx, p)
}

// InsertActions is ActionInsertOne for each row, sent together. ActionInsert
// inserts rows selected from arrays, a select that reads no distributed table,
// which Citus runs through the coordinator; an insert that names its client runs
// on the client's shard. What ActionInsert joins, each predecessor and the
// destinations that are disconnected, is read first with statements on the
// client's shard.
func (Sharded) InsertActions(ctx context.Context, q *db.Queries, p db.ActionInsertParams) ([]db.ActionInsertRow, error) {
	disconnected, err := q.DestinationDisconnectedList(ctx)
	if err != nil {
		return nil, fmt.Errorf("read disconnected destinations: %w", err)
	}
	one := make([]db.ActionInsertOneParams, len(p.Clients))
	for i := range one {
		var pred *db.Action
		if p.AfterIds[i] != 0 {
			a, err := q.ActionGetByKey(ctx, db.ActionGetByKeyParams{Client: p.Clients[i], ID: p.AfterIds[i]})
			switch {
			case err == nil:
				pred = &a
			case !errors.Is(err, pgx.ErrNoRows):
				return nil, fmt.Errorf("read predecessor %d: %w", p.AfterIds[i], err)
			}
		}
		one[i] = actionInsertOne(p, i, pred, slices.Contains(disconnected, p.Destinations[i]))
	}
	var rows []db.ActionInsertRow
	var first error
	q.ActionInsertOne(ctx, one).Query(func(_ int, created []db.ActionInsertOneRow, err error) {
		if first == nil {
			first = err
		}
		for _, r := range created {
			rows = append(rows, db.ActionInsertRow(r))
		}
	})
	return rows, first
}

// actionInsertOne is row i of p as ActionInsertOne's arguments, with the state,
// reason and due time ActionInsert gives it from its cutover, its predecessor
// (nil: none, or none found) and its destination.
func actionInsertOne(p db.ActionInsertParams, i int, pred *db.Action, disconnected bool) db.ActionInsertOneParams {
	r := db.ActionInsertOneParams{Client: p.Clients[i], Environment: p.Environments[i], Source: p.Sources[i],
		Name: p.Names[i], BusinessKey: p.BusinessKeys[i], KeyParts: p.KeyParts[i], OperationKey: p.OperationKeys[i],
		Destination: p.Destinations[i], Params: p.Params[i], ParamsSha256: p.ParamsSha256s[i], State: p.ReadyState,
		Owner: p.Owners[i], Resource: p.Resources[i], MaxAttempts: p.MaxAttempts[i], WithinSeconds: p.WithinSeconds[i],
		Due: true}
	if p.AfterIds[i] != 0 {
		r.AfterID = &p.AfterIds[i]
		r.Due = pred != nil && slices.Contains(ledger.PredecessorDoneStates, pred.State)
	}
	if p.HasOccurredAts[i] {
		r.OccurredAt = &p.OccurredAts[i]
	}
	switch {
	case p.CutoverStates[i] != "":
		r.State, r.Reason = p.CutoverStates[i], p.CutoverReasons[i]
	case disconnected:
		r.State, r.Reason = p.HeldState, "destination "+r.Destination+" is disconnected"
	case p.AfterIds[i] != 0 && (pred == nil || pred.State != ledger.StateConfirmed):
		r.Reason = "waiting for its predecessor"
		if pred != nil {
			r.Reason = "waiting for " + pred.Name
		}
	}
	return r
}
