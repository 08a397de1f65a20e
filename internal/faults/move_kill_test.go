package faults

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
)

// TestMoveOfOldBodiesKilledAndRunAgain: a database populated in the layout before
// event_bodies (bytes in the events' rows) is moved by `oncehook migrate`, which
// is killed with SIGKILL once it has moved a batch, and run again to the end.
// Every event then has its bytes once, in event_bodies, the same bytes it had.
func TestMoveOfOldBodiesKilledAndRunAgain(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewDSN(t)
	ctx := context.Background()
	const n = 60000
	if _, err := pool.Exec(ctx, `
INSERT INTO events (client, environment, source, source_event_id, type, status, body, payload, body_sha256, headers)
SELECT CASE WHEN i % 2 = 0 THEN 'acme' ELSE 'beta' END, 'live', 'shop', 'evt_' || i, 't', 'routed',
       convert_to(repeat('{"id":"evt_' || i || '"}', 10), 'UTF8'), NULL, sha256(convert_to('evt_' || i, 'UTF8')),
       jsonb_build_object('X-Event-Id', 'evt_' || i)
FROM generate_series(1, $1::integer) AS i`, n); err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_URL=" + dsn}
	first := startProcess(t, "migrate-1", env, "migrate")
	first.waitOutput(`moved the bodies of \d+ events`)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.wait(30 * time.Second)
	var moved, left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE body_day IS NOT NULL), count(*) FILTER (WHERE body_day IS NULL)
		FROM events`).Scan(&moved, &left); err != nil {
		t.Fatal(err)
	}
	if moved == 0 || left == 0 {
		t.Fatalf("killed with %d events moved and %d left, want it killed halfway", moved, left)
	}
	t.Logf("killed after moving %d of %d", moved, n)
	second := startProcess(t, "migrate-2", env, "migrate")
	second.waitOutput(`every event's body is in event_bodies`)
	second.wait(30 * time.Second)
	var wrong, rows int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM events e WHERE e.body_day IS NULL OR e.body IS NOT NULL OR e.headers <> '{}'
		   OR (SELECT count(*) FROM event_bodies b WHERE b.client = e.client AND b.event_id = e.id) <> 1
		   OR NOT EXISTS (SELECT 1 FROM event_bodies b WHERE b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
		                  AND b.body = convert_to(repeat('{"id":"' || e.source_event_id || '"}', 10), 'UTF8')
		                  AND b.headers = jsonb_build_object('X-Event-Id', e.source_event_id))),
		(SELECT count(*) FROM event_bodies)`).Scan(&wrong, &rows); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 || rows != n {
		t.Errorf("%d events without their own bytes once in event_bodies, %d rows of bytes; want 0 and %d", wrong, rows, n)
	}
}
