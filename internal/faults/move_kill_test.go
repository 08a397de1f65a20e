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

// TestMoveOfOldRowsKilledAndRunAgain: actions whose attempts and audit were
// written before those were partitioned by day (in the partitions of 1970, the
// tables as they were) are moved by `oncehook migrate`, killed with SIGKILL once
// it has moved a batch and run again to the end. Every action then has its
// attempt and its audit entry once, in the partitions of its rows_day, today's,
// with the times they recorded; the old partitions are gone.
func TestMoveOfOldRowsKilledAndRunAgain(t *testing.T) {
	t.Parallel()
	pool, dsn := dbtest.NewDSN(t)
	ctx := context.Background()
	const n = 20000
	if _, err := pool.Exec(ctx, `
WITH a AS (
    INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key, destination,
                         params, params_sha256, state, max_attempts, give_up_at, rows_day)
    SELECT CASE WHEN i % 2 = 0 THEN 'acme' ELSE 'beta' END, 'live', 'shop', 'n', 'enq_' || i, '[]', 'op_' || i, 'crm',
           '{}', '\x00', 'confirmed', 3, now(), '1970-01-01'
    FROM generate_series(1, $1::integer) AS i
    RETURNING client, id, operation_key
), t AS (
    INSERT INTO attempts (client, action_id, kind, operation_key, worker, status, started_at, part_day)
    SELECT client, id, 'call', operation_key, 'w', 'finished', timestamptz '2026-01-02 03:04:05+00', '1970-01-01' FROM a
)
INSERT INTO audit (client, action_id, actor, act, note, at, part_day)
SELECT client, id, 'ada', 'note', 'before', timestamptz '2026-01-02 03:04:05+00', '1970-01-01' FROM a`, n); err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_URL=" + dsn}
	first := startProcess(t, "migrate-1", env, "migrate")
	first.waitOutput(`moved the attempts and audit of \d+ actions into their days`)
	if err := first.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	first.wait(30 * time.Second)
	var moved, left int
	if err := pool.QueryRow(ctx, `SELECT count(*) FILTER (WHERE rows_day > '1970-01-01'), count(*) FILTER (WHERE rows_day = '1970-01-01')
		FROM actions`).Scan(&moved, &left); err != nil {
		t.Fatal(err)
	}
	if moved == 0 || left == 0 {
		t.Fatalf("killed with %d actions moved and %d left, want it killed halfway", moved, left)
	}
	t.Logf("killed after moving %d of %d", moved, n)
	second := startProcess(t, "migrate-2", env, "migrate")
	second.waitOutput(`every action's attempts and audit are in their days' partitions`)
	second.wait(30 * time.Second)
	var wrong, attempts, audit, old int
	if err := pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM actions a WHERE a.rows_day <> (now() AT TIME ZONE 'UTC')::date
		   OR (SELECT count(*) FROM attempts t WHERE t.client = a.client AND t.action_id = a.id AND t.part_day = a.rows_day
		       AND t.operation_key = a.operation_key AND t.started_at = timestamptz '2026-01-02 03:04:05+00') <> 1
		   OR (SELECT count(*) FROM audit u WHERE u.client = a.client AND u.action_id = a.id AND u.part_day = a.rows_day
		       AND u.note = 'before' AND u.at = timestamptz '2026-01-02 03:04:05+00') <> 1),
		(SELECT count(*) FROM attempts), (SELECT count(*) FROM audit),
		(SELECT count(*) FROM pg_class WHERE relname IN ('attempts_19700101', 'audit_19700101'))`).Scan(&wrong, &attempts, &audit, &old); err != nil {
		t.Fatal(err)
	}
	if wrong != 0 || attempts != n || audit != n || old != 0 {
		t.Errorf("%d actions without their attempt and audit once in today's partitions, %d attempts, %d audit entries, "+
			"%d old partitions left; want 0, %d, %d and 0", wrong, attempts, audit, old, n, n)
	}
}
