package store

import (
	"context"
	"fmt"

	"github.com/oncehook/oncehook/db"
)

// InsertEvents is EventInsertBatch: one statement that commits on its own.
func (Single) InsertEvents(ctx context.Context, c Conn, p db.EventInsertBatchParams) ([]db.EventInsertBatchRow, error) {
	return db.New(c).EventInsertBatch(ctx, p)
}

// InsertEvents is the batch's rows in one statement of many rows of values
// (db.EventInsertRows, EventInsertOne's form), then the bytes of the events it made
// in another (db.EventBodiesInsert), inside a transaction of its own: Citus splits
// each by shard without planning a query on the coordinator, and without the
// transaction it commits each shard's rows as they come. The rows are returned in
// the order of p.
func (Sharded) InsertEvents(ctx context.Context, c Conn, p db.EventInsertBatchParams) ([]db.EventInsertBatchRow, error) {
	one := make([]db.EventInsertOneParams, len(p.Clients))
	at := make(map[[3]string]int, len(p.Clients))
	for i := range one {
		one[i] = db.EventInsertOneParams{Client: p.Clients[i], Environment: p.Environments[i], Source: p.Sources[i],
			SourceEventID: p.SourceEventIds[i], Type: p.Types[i], Day: p.Day,
			BodySha256: p.BodySha256s[i], OccurredAt: p.OccurredAts[i],
			Deliveries: p.Deliveries[i], Conflict: p.Conflicts[i], Via: p.Vias[i]}
		at[[3]string{p.Clients[i], p.Sources[i], p.SourceEventIds[i]}] = i
	}
	rows := make([]db.EventInsertBatchRow, len(one))
	err := db.WithTx(ctx, c, func(q *db.Queries) error {
		got, err := q.EventInsertRows(ctx, one)
		if err != nil {
			return err
		}
		if len(got) != len(one) {
			return fmt.Errorf("insert events: %d rows came back for %d", len(got), len(one))
		}
		var bodies []db.EventBodyInsertOneParams
		for _, r := range got {
			i, ok := at[[3]string{r.Client, r.Source, r.SourceEventID}]
			if !ok {
				return fmt.Errorf("insert events: a row came back for %s/%s, which the batch does not hold", r.Source, r.SourceEventID)
			}
			rows[i] = db.EventInsertBatchRow(r)
			if r.Inserted {
				bodies = append(bodies, db.EventBodyInsertOneParams{Client: r.Client, EventID: r.ID, Day: p.Day,
					Body: p.Bodies[i], Payload: p.Payloads[i], Headers: p.Headers[i]})
			}
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
