-- name: EventInsert :one
-- Stores a delivery, or counts a repeat of a known one. same_body tells a repeat
-- from a conflict (a repeat whose body differs).
INSERT INTO events (client, environment, source, source_event_id, type, body, payload,
                    body_sha256, headers, occurred_at)
VALUES (@client, @environment, @source, @source_event_id, @type, @body, @payload,
        @body_sha256, @headers, @occurred_at)
ON CONFLICT (client, source, source_event_id) DO UPDATE
SET deliveries       = events.deliveries + 1,
    last_received_at = now(),
    conflict         = events.conflict OR events.body_sha256 <> EXCLUDED.body_sha256
RETURNING id, (xmax = 0)::boolean AS inserted, (body_sha256 = @body_sha256)::boolean AS same_body;

-- name: EventConflictInsert :exec
INSERT INTO event_conflicts (client, event_id, body, body_sha256, headers)
VALUES (@client, @event_id, @body, @body_sha256, @headers)
ON CONFLICT (client, event_id, body_sha256) DO NOTHING;

-- name: EventGet :one
SELECT * FROM events WHERE id = @id;

-- name: EventCount :one
SELECT count(*) FROM events;

-- name: EventConflictList :many
SELECT * FROM event_conflicts WHERE client = @client AND event_id = @event_id ORDER BY id;

-- name: EventClaimReceived :many
-- The router's claim: received events, oldest first, skipping those another router holds.
SELECT * FROM events
WHERE status = 'received'
ORDER BY id
LIMIT @max_events
FOR UPDATE SKIP LOCKED;

-- name: EventSetStatus :exec
UPDATE events SET status = @status, reason = @reason, routed_at = now()
WHERE client = @client AND id = @id;

-- name: EventList :many
SELECT id, client, environment, source, source_event_id, type, status, reason, deliveries,
       conflict, occurred_at, received_at, last_received_at
FROM events
WHERE (@source::text = '' OR source = @source)
  AND (@status::text = '' OR status = @status)
  AND (sqlc.narg(before_id)::bigint IS NULL OR id < sqlc.narg(before_id)::bigint)
ORDER BY id DESC
LIMIT @max_rows;

-- name: Notify :exec
SELECT pg_notify(@channel::text, '');
