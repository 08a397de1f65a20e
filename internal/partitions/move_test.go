package partitions_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/store"
)

// oldLayout stores n events of each client as the inbox did before event_bodies:
// their bytes in their own rows, no body_day. Every third has no payload, every
// fifth had its body dropped by retention.
func oldLayout(t *testing.T, pool *pgxpool.Pool, n int, clients ...string) {
	t.Helper()
	for _, c := range clients {
		if _, err := pool.Exec(context.Background(), `
INSERT INTO events (client, environment, source, source_event_id, type, status, body, payload, body_sha256, headers)
SELECT $1, 'live', 'shop', 'evt_' || i, 't', 'routed',
       CASE WHEN i % 5 = 0 THEN NULL ELSE convert_to('{"id":"evt_' || i || '","client":"' || $1 || '"}', 'UTF8') END,
       CASE WHEN i % 3 = 0 THEN NULL ELSE convert_to('{"payload":' || i || '}', 'UTF8') END,
       '\x00', jsonb_build_object('X-Event-Id', 'evt_' || i)
FROM generate_series(1, $2::integer) AS i`, c, n); err != nil {
			t.Fatal(err)
		}
	}
}

// bytesRead is every event's bytes as the readers get them (EventGetByKey).
func bytesRead(t *testing.T, pool *pgxpool.Pool) map[string]string {
	t.Helper()
	rows, err := pool.Query(context.Background(), `SELECT client, id FROM events ORDER BY client, id`)
	if err != nil {
		t.Fatal(err)
	}
	type key struct {
		client string
		id     int64
	}
	var keys []key
	for rows.Next() {
		var k key
		if err := rows.Scan(&k.client, &k.id); err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	q := db.New(pool)
	for _, k := range keys {
		ev, err := q.EventGetByKey(context.Background(), db.EventGetByKeyParams{Client: k.client, ID: k.id})
		if err != nil {
			t.Fatal(err)
		}
		out[fmt.Sprintf("%s/%s", k.client, ev.SourceEventID)] = fmt.Sprintf("body %q payload %q headers %s",
			ev.Body, ev.Payload, ev.Headers)
	}
	return out
}

func count(t *testing.T, pool *pgxpool.Pool, sql string) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestMoveOldMovesEveryBodyOnce: the bytes of events stored before event_bodies
// move out of their rows, each event's once, and every reader gets the same
// bytes before and after (a dropped body stays dropped); two movers at once (one
// waiting for the other, one skipping when busy) move each once between them; a
// second run finds nothing left.
func TestMoveOldMovesEveryBodyOnce(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	oldLayout(t, pool, 2500, "acme", "beta")
	before := bytesRead(t, pool)
	var wg sync.WaitGroup
	results := make([]partitions.Moved, 2)
	errs := make([]error, 2)
	for i := range results {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = partitions.MoveOld(ctx, pool, store.For(pool), i == 0, nil)
		}()
	}
	wg.Wait()
	moved := 0
	for i, r := range results {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		moved += r.Bodies
	}
	if moved != 5000 {
		t.Errorf("the movers moved %d events' bytes between them (%+v), want 5000", moved, results)
	}
	if n := count(t, pool, `SELECT count(*) FROM events WHERE body_day IS NULL OR body IS NOT NULL OR payload IS NOT NULL OR headers <> '{}'`); n != 0 {
		t.Errorf("%d events keep bytes in their rows", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM events e WHERE (SELECT count(*) FROM event_bodies b
		WHERE b.client = e.client AND b.event_id = e.id AND b.day = e.body_day) <> 1`); n != 0 {
		t.Errorf("%d events without exactly one row of bytes", n)
	}
	if n := count(t, pool, `SELECT count(*) FROM event_bodies`); n != 5000 {
		t.Errorf("%d rows of bytes, want 5000", n)
	}
	after := bytesRead(t, pool)
	for k, b := range before {
		if after[k] != b {
			t.Errorf("%s: read %s after the move, %s before", k, after[k], b)
		}
	}
	if len(after) != len(before) || len(before) != 5000 {
		t.Errorf("%d events read after, %d before, want 5000", len(after), len(before))
	}
	if r, err := partitions.MoveOld(ctx, pool, store.For(pool), true, nil); err != nil || r.Bodies != 0 {
		t.Errorf("a second run: %+v %v, want nothing left", r, err)
	}
}
