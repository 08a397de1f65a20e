package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// EventInsertRows stores deliveries one row a statement, as Citus routes best
// (see EventInsertOne): for each row its EventInsertOne and then its
// EventBodyInsertOne, all queued in one batch, one round trip. bodies[i] holds the
// bytes of rows[i]. It returns EventInsertOne's row for each, in order; the caller
// runs it in a transaction, so that a delivery is stored with its bytes or not at
// all.
func (q *Queries) EventInsertRows(ctx context.Context, rows []EventInsertOneParams, bodies []EventBodyInsertOneParams) ([]EventInsertOneRow, error) {
	b := &pgx.Batch{}
	for i, a := range rows {
		// The arguments in the order of the statements' numbered parameters
		// (events.sql.go); internal/store's agreement test of the inserts fails
		// on any other.
		b.Queue(eventInsertOne, a.Client, a.Environment, a.Source, a.SourceEventID, a.Type, a.Day,
			a.BodySha256, a.OccurredAt, a.Deliveries, a.Conflict, a.Via)
		c := bodies[i]
		b.Queue(eventBodyInsertOne, c.Body, c.Payload, c.Headers, c.Client, c.Source, c.SourceEventID, c.Day)
	}
	br := q.db.SendBatch(ctx, b)
	defer br.Close()
	out := make([]EventInsertOneRow, len(rows))
	for i := range rows {
		r := &out[i]
		if err := br.QueryRow().Scan(&r.ID, &r.Client, &r.Source, &r.SourceEventID, &r.Inserted, &r.BodySha256, &r.Via); err != nil {
			return nil, err
		}
		if _, err := br.Exec(); err != nil {
			return nil, err
		}
	}
	return out, br.Close()
}
