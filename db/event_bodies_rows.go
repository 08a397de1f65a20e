package db

import (
	"context"
	"fmt"
	"strings"
)

// bodiesAtOnce bounds the rows of one EventBodiesInsert statement (six
// parameters a row, under Postgres's 65,535).
const bodiesAtOnce = 1000

// EventBodiesInsert inserts the bytes of new events as one multi-row VALUES
// statement (EventBodyInsertOne for many rows; a statement sqlc cannot write, as
// its number of rows varies). On Citus a multi-row insert of values is split by
// shard without planning a query on the coordinator: one statement a batch cost
// the coordinator a fraction of one a row.
func (q *Queries) EventBodiesInsert(ctx context.Context, rows []EventBodyInsertOneParams) error {
	for start := 0; start < len(rows); start += bodiesAtOnce {
		chunk := rows[start:min(start+bodiesAtOnce, len(rows))]
		var sql strings.Builder
		sql.WriteString("INSERT INTO event_bodies (client, event_id, day, body, payload, headers) VALUES ")
		args := make([]any, 0, 6*len(chunk))
		for i, r := range chunk {
			if i > 0 {
				sql.WriteString(", ")
			}
			n := 6 * i
			fmt.Fprintf(&sql, "($%d, $%d, $%d::date, $%d, $%d, $%d)", n+1, n+2, n+3, n+4, n+5, n+6)
			args = append(args, r.Client, r.EventID, r.Day, r.Body, r.Payload, r.Headers)
		}
		if _, err := q.db.Exec(ctx, sql.String(), args...); err != nil {
			return err
		}
	}
	return nil
}
