package db

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
)

// eventRowsSQL is EventInsertOne's statement cut around its one row of values:
// what comes before the row, the row, and what comes after (the conflict rule and
// what it returns), so that EventInsertRows sends many rows under the same rule.
var eventRowsSQL = sync.OnceValues(func() (parts [3]string, err error) {
	m := regexp.MustCompile(`(?s)^(.*?VALUES\s*)(\(.*?\))(\s*ON CONFLICT.*)$`).FindStringSubmatch(eventInsertOne)
	if m == nil {
		return parts, fmt.Errorf("EventInsertOne's statement has no row of values to repeat")
	}
	return [3]string{m[1], m[2], m[3]}, nil
})

var parameter = regexp.MustCompile(`\$(\d+)`)

// EventInsertRows is EventInsertOne for many rows in one statement of many rows
// of values, which Citus splits by shard without planning a query on the
// coordinator (a statement a row cost the coordinator most of what a delivery
// costs it). Its rows come back in no particular order: the caller matches them
// by identity (client, source, source_event_id), which is unique in rows.
func (q *Queries) EventInsertRows(ctx context.Context, rows []EventInsertOneParams) ([]EventInsertOneRow, error) {
	parts, err := eventRowsSQL()
	if err != nil || len(rows) == 0 {
		return []EventInsertOneRow{}, err
	}
	var sql strings.Builder
	sql.WriteString(parts[0])
	args := make([]any, 0, 11*len(rows))
	for i, a := range rows {
		if i > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString(parameter.ReplaceAllStringFunc(parts[1], func(p string) string {
			n, _ := strconv.Atoi(p[1:])
			return "$" + strconv.Itoa(n+11*i)
		}))
		// In the order of the statement's numbered parameters (see EventInsertOne).
		args = append(args, a.Client, a.Environment, a.Source, a.SourceEventID, a.Type, a.Day,
			a.BodySha256, a.OccurredAt, a.Deliveries, a.Conflict, a.Via)
	}
	sql.WriteString(parts[2])
	res, err := q.db.Query(ctx, sql.String(), args...)
	if err != nil {
		return nil, err
	}
	defer res.Close()
	out := make([]EventInsertOneRow, 0, len(rows))
	for res.Next() {
		var r EventInsertOneRow
		if err := res.Scan(&r.ID, &r.Client, &r.Source, &r.SourceEventID, &r.Inserted, &r.BodySha256, &r.Via); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, res.Err()
}

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
