-- Moving the bytes of events stored before event_bodies (migration 00038) out of
-- their rows, a client at a time, in batches (internal/partitions, MoveOld).

-- name: EventClientsStored :many
-- Every client with events, on one Postgres: read along the primary key, one probe
-- a client (a loose index scan), however many events.
WITH RECURSIVE c AS (
    (SELECT e.client FROM events e ORDER BY e.client LIMIT 1)
    UNION ALL
    SELECT (SELECT e.client FROM events e WHERE e.client > c.client ORDER BY e.client LIMIT 1)
    FROM c WHERE c.client IS NOT NULL
)
SELECT c.client::text AS client FROM c WHERE c.client IS NOT NULL;

-- name: EventClientsWithRows :many
-- EventClientsStored on Citus: each shard groups its own rows.
SELECT client FROM events GROUP BY client ORDER BY client;

-- name: EventBodiesMoveOld :one
-- Moves the bytes of up to @batch of the client's events stored before
-- event_bodies (body_day NULL) with ids above @after, in id order, into @day's
-- partition: written there and cleared from the event's row in this one
-- statement, so that a reader finds them in one place or the other, never in
-- neither and never twice. Returns how many moved and the highest id it looked at
-- (0 when it found none: the client is done). The rows are locked while they move,
-- as routing locks them: a routing in flight finishes first.
WITH old AS (
    SELECT e.client, e.id, e.body, e.payload, e.headers FROM events e
    WHERE e.client = @client AND e.id > @after AND e.body_day IS NULL
    ORDER BY e.id
    LIMIT @batch
    FOR UPDATE
), bodies AS (
    INSERT INTO event_bodies (client, event_id, day, body, payload, headers)
    SELECT old.client, old.id, @day::date, old.body, old.payload, old.headers FROM old
    WHERE old.client = @client
), moved AS (
    UPDATE events e SET body_day = @day::date, body = NULL, payload = NULL, headers = '{}'
    FROM old WHERE e.client = @client AND old.client = @client AND e.id = old.id
    RETURNING e.id
)
SELECT count(*)::integer AS moved, coalesce(max(id), 0)::bigint AS last_id FROM moved;
