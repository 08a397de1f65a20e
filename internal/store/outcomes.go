package store

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
)

// What the performer writes over many clients' actions at once. One Postgres
// writes them in one statement; Citus in one statement a client, each naming its
// client, so that each runs on the client's one shard.

// RecordOutcomes is ActionRecordBatch for the whole batch.
func (Single) RecordOutcomes(ctx context.Context, q *db.Queries, p db.ActionRecordBatchParams) ([]db.ActionRecordBatchRow, error) {
	p.Sharded = false
	return q.ActionRecordBatch(ctx, p)
}

// RecordOutcomes is ActionRecordBatch for each client's rows of the batch.
func (Sharded) RecordOutcomes(ctx context.Context, q *db.Queries, p db.ActionRecordBatchParams) ([]db.ActionRecordBatchRow, error) {
	var all []db.ActionRecordBatchRow
	for _, rows := range byClient(p.Clients) {
		one := db.ActionRecordBatchParams{Clients: at(p.Clients, rows), Ids: at(p.Ids, rows),
			AttemptIds: at(p.AttemptIds, rows), Observed: at(p.Observed, rows), HttpStatuses: at(p.HttpStatuses, rows),
			Errors: at(p.Errors, rows), States: at(p.States, rows), Reasons: at(p.Reasons, rows),
			NextAttemptAts: at(p.NextAttemptAts, rows), ExternalRefs: at(p.ExternalRefs, rows), Results: at(p.Results, rows),
			Owners: at(p.Owners, rows), LeaseTokens: at(p.LeaseTokens, rows), AttemptsBack: at(p.AttemptsBack, rows),
			RowsDays: at(p.RowsDays, rows), Sharded: true, Client: p.Clients[rows[0]], Worker: p.Worker}
		recorded, err := q.ActionRecordBatch(ctx, one)
		if err != nil {
			return nil, err
		}
		all = append(all, recorded...)
	}
	return all, nil
}

// RecoverLeases is ActionRecoverLeases for the whole batch.
func (Single) RecoverLeases(ctx context.Context, q *db.Queries, p db.ActionRecoverLeasesParams) ([]db.ActionRecoverLeasesRow, error) {
	p.Sharded = false
	return q.ActionRecoverLeases(ctx, p)
}

// RecoverLeases is ActionRecoverLeases for each client's rows of the batch.
func (Sharded) RecoverLeases(ctx context.Context, q *db.Queries, p db.ActionRecoverLeasesParams) ([]db.ActionRecoverLeasesRow, error) {
	var all []db.ActionRecoverLeasesRow
	for _, rows := range byClient(p.Clients) {
		recovered, err := q.ActionRecoverLeases(ctx, db.ActionRecoverLeasesParams{Sharded: true, Client: p.Clients[rows[0]],
			Clients: at(p.Clients, rows), Ids: at(p.Ids, rows), States: at(p.States, rows),
			Reasons: at(p.Reasons, rows), NextAttemptAts: at(p.NextAttemptAts, rows), RowsDays: at(p.RowsDays, rows)})
		if err != nil {
			return nil, err
		}
		all = append(all, recovered...)
	}
	return all, nil
}

// ReleaseStrayHeld is ActionReleaseStrayHeld over every client at once.
func (Single) ReleaseStrayHeld(ctx context.Context, q *db.Queries, _ Clients) ([]int64, error) {
	return q.ActionReleaseStrayHeld(ctx, db.ActionReleaseStrayHeldParams{})
}

// ReleaseStrayHeld is ActionReleaseStrayHeld for each client.
func (Sharded) ReleaseStrayHeld(ctx context.Context, q *db.Queries, clients Clients) ([]int64, error) {
	return eachClient(ctx, clients, func(client string) ([]int64, error) {
		return q.ActionReleaseStrayHeld(ctx, db.ActionReleaseStrayHeldParams{Sharded: true, Client: client})
	})
}

// ReleaseLeases is ActionReleaseLeases over every client at once.
func (Single) ReleaseLeases(ctx context.Context, q *db.Queries, worker string, _ Clients) ([]int64, error) {
	return q.ActionReleaseLeases(ctx, db.ActionReleaseLeasesParams{Worker: &worker})
}

// ReleaseLeases is ActionReleaseLeases for each client.
func (Sharded) ReleaseLeases(ctx context.Context, q *db.Queries, worker string, clients Clients) ([]int64, error) {
	return eachClient(ctx, clients, func(client string) ([]int64, error) {
		return q.ActionReleaseLeases(ctx, db.ActionReleaseLeasesParams{Worker: &worker, Sharded: true, Client: client})
	})
}

// HoldDestination is ActionHoldDestination over every client at once.
func (Single) HoldDestination(ctx context.Context, q *db.Queries, p db.ActionHoldDestinationParams, _ Clients) ([]int64, error) {
	p.Sharded, p.Client = false, ""
	return q.ActionHoldDestination(ctx, p)
}

// HoldDestination is ActionHoldDestination for each client.
func (Sharded) HoldDestination(ctx context.Context, q *db.Queries, p db.ActionHoldDestinationParams, clients Clients) ([]int64, error) {
	return eachClient(ctx, clients, func(client string) ([]int64, error) {
		p.Sharded, p.Client = true, client
		return q.ActionHoldDestination(ctx, p)
	})
}

// ReleaseParked is ActionReleaseParked over every client at once.
func (Single) ReleaseParked(ctx context.Context, q *db.Queries, destination string, at time.Time, _ Clients) (int64, error) {
	return q.ActionReleaseParked(ctx, db.ActionReleaseParkedParams{Destination: destination, ReleasedAt: at})
}

// ReleaseParked is ActionReleaseParked for each client.
func (Sharded) ReleaseParked(ctx context.Context, q *db.Queries, destination string, at time.Time, clients Clients) (int64, error) {
	return countEach(ctx, clients, func(client string) (int64, error) {
		return q.ActionReleaseParked(ctx, db.ActionReleaseParkedParams{Destination: destination, ReleasedAt: at,
			Sharded: true, Client: client})
	})
}

// Clients lists the clients a statement over every client's actions is run for
// on Citus, one statement each. One Postgres never asks.
type Clients func(ctx context.Context) ([]string, error)

// eachClient runs fn for each client and gathers what it returns.
func eachClient[T any](ctx context.Context, clients Clients, fn func(client string) ([]T, error)) ([]T, error) {
	list, err := clients(ctx)
	if err != nil {
		return nil, fmt.Errorf("list the clients: %w", err)
	}
	var all []T
	for _, client := range list {
		rows, err := fn(client)
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
	}
	return all, nil
}

// countEach runs fn for each client and adds up the rows it counts.
func countEach(ctx context.Context, clients Clients, fn func(client string) (int64, error)) (int64, error) {
	counts, err := eachClient(ctx, clients, func(client string) ([]int64, error) {
		n, err := fn(client)
		return []int64{n}, err
	})
	var n int64
	for _, c := range counts {
		n += c
	}
	return n, err
}

// byClient groups the indexes of a batch's rows by their client, the clients in
// the order they first appear, the rows of each in the batch's order.
func byClient(clients []string) [][]int {
	group := map[string]int{}
	var out [][]int
	for i, c := range clients {
		g, ok := group[c]
		if !ok {
			g = len(out)
			group[c] = g
			out = append(out, nil)
		}
		out[g] = append(out[g], i)
	}
	return out
}

// at is the elements of s at the indexes rows.
func at[T any](s []T, rows []int) []T {
	out := make([]T, len(rows))
	for i, r := range rows {
		out[i] = s[r]
	}
	return out
}
