package store

import (
	"context"

	"github.com/oncehook/oncehook/db"
)

// InsertEvents is EventInsertBatch: one statement that commits on its own.
func (Single) InsertEvents(ctx context.Context, c Conn, p db.EventInsertBatchParams) ([]db.EventInsertBatchRow, error) {
	return db.New(c).EventInsertBatch(ctx, p)
}

// InsertEvents is EventInsertOne for each row, each on its client's shard, sent
// together in one round trip, then the bytes of the events it made in one
// statement of many rows (db.EventBodiesInsert), inside a transaction of its own:
// without one, Citus commits each row on its worker as it comes.
func (Sharded) InsertEvents(ctx context.Context, c Conn, p db.EventInsertBatchParams) ([]db.EventInsertBatchRow, error) {
	one := make([]db.EventInsertOneParams, len(p.Clients))
	for i := range one {
		one[i] = db.EventInsertOneParams{Client: p.Clients[i], Environment: p.Environments[i], Source: p.Sources[i],
			SourceEventID: p.SourceEventIds[i], Type: p.Types[i], Day: p.Day,
			BodySha256: p.BodySha256s[i], OccurredAt: p.OccurredAts[i],
			Deliveries: p.Deliveries[i], Conflict: p.Conflicts[i], Via: p.Vias[i]}
	}
	rows := make([]db.EventInsertBatchRow, 0, len(one))
	err := db.WithTx(ctx, c, func(q *db.Queries) error {
		var first error
		var bodies []db.EventBodyInsertOneParams
		q.EventInsertOne(ctx, one).QueryRow(func(i int, r db.EventInsertOneRow, err error) {
			if first == nil {
				first = err
			}
			rows = append(rows, db.EventInsertBatchRow(r))
			if err == nil && r.Inserted {
				bodies = append(bodies, db.EventBodyInsertOneParams{Client: r.Client, EventID: r.ID, Day: p.Day,
					Body: p.Bodies[i], Payload: p.Payloads[i], Headers: p.Headers[i]})
			}
		})
		if first != nil || len(bodies) == 0 {
			return first
		}
		return q.EventBodiesInsert(ctx, bodies)
	})
	if err != nil {
		return nil, err
	}
	return rows, nil
}

// ClaimEvents is EventClaimReceived reading the claimed events by their keys
// alone: with the client a constant of that read, one Postgres plans it worse
// (see the query).
func (Single) ClaimEvents(ctx context.Context, q *db.Queries, client string, n int) ([]db.EventClaimReceivedRow, error) {
	return q.EventClaimReceived(ctx, db.EventClaimReceivedParams{Client: client, MaxEvents: int32(n)})
}

// ClaimEvents is EventClaimReceived naming the client in the read of the claimed
// events, which routes it to the client's shard.
func (Sharded) ClaimEvents(ctx context.Context, q *db.Queries, client string, n int) ([]db.EventClaimReceivedRow, error) {
	return q.EventClaimReceived(ctx, db.EventClaimReceivedParams{Client: client, MaxEvents: int32(n), Sharded: true})
}

// SetEventStatuses is EventSetStatuses over the batch's rows by their keys.
func (Single) SetEventStatuses(ctx context.Context, q *db.Queries, p db.EventSetStatusesParams) error {
	p.Sharded = false
	return q.EventSetStatuses(ctx, p)
}

// SetEventStatuses is EventSetStatuses naming the batch's client (p.Client), to
// route it to the client's shard.
func (Sharded) SetEventStatuses(ctx context.Context, q *db.Queries, p db.EventSetStatusesParams) error {
	p.Sharded = true
	return q.EventSetStatuses(ctx, p)
}
