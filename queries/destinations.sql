-- name: DestinationSetStatus :exec
INSERT INTO destinations (name, status, reason, changed_at) VALUES (@name, @status, @reason, now())
ON CONFLICT (name) DO UPDATE SET status = EXCLUDED.status, reason = EXCLUDED.reason, changed_at = EXCLUDED.changed_at;

-- name: DestinationDisconnect :execrows
-- A destination refused credentials to a call claimed at called_at: disconnected,
-- unless it was connected again since that call was claimed. A refusal that
-- arrives after an admin reconnected the destination (the call carried the old
-- credentials) is stale: it changes nothing, and the one action it held is
-- released by the recovery (ActionReleaseStrayHeld).
INSERT INTO destinations (name, status, reason, changed_at) VALUES (@name, 'disconnected', @reason, now())
ON CONFLICT (name) DO UPDATE SET status = EXCLUDED.status, reason = EXCLUDED.reason, changed_at = EXCLUDED.changed_at
WHERE destinations.status = 'disconnected' OR destinations.changed_at <= @called_at::timestamptz;

-- name: DestinationList :many
-- held counts the actions of the clients the reader sees.
SELECT d.name, d.status, d.reason, d.changed_at,
       (SELECT count(*) FROM actions a WHERE a.destination = d.name AND a.state = 'held'
          AND (@all_clients::boolean OR a.client = ANY(@scope_clients::text[])))::bigint AS held
FROM destinations d ORDER BY d.name;

-- name: DestinationListSharded :many
-- DestinationList on Citus, which runs no subquery correlated with a reference
-- table: the held actions counted by destination across the shards, then joined.
SELECT d.name, d.status, d.reason, d.changed_at, coalesce(h.n, 0)::bigint AS held
FROM destinations d
LEFT JOIN (SELECT a.destination, count(*) AS n FROM actions a
           WHERE a.state = 'held' AND (@all_clients::boolean OR a.client = ANY(@scope_clients::text[]))
           GROUP BY a.destination) h ON h.destination = d.name
ORDER BY d.name;

-- name: DestinationDisconnectedList :many
-- The destinations that are disconnected: what ActionInsert reads of them, read
-- first by the router on Citus (ActionInsertOne).
SELECT name FROM destinations WHERE status = 'disconnected' ORDER BY name;
