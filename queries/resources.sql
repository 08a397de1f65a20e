-- name: ResourceEnsure :exec
INSERT INTO resources (client, source, resource) VALUES (@client, @source, @resource)
ON CONFLICT (client, source, resource) DO NOTHING;

-- name: ResourceGetForUpdate :one
SELECT * FROM resources WHERE client = @client AND source = @source AND resource = @resource
FOR UPDATE;

-- name: ResourceSeen :exec
UPDATE resources
SET last_occurred_at = greatest(last_occurred_at, sqlc.narg(occurred_at)::timestamptz)
WHERE client = @client AND source = @source AND resource = @resource;

-- name: ResourceCancel :exec
UPDATE resources
SET cancelled_at = coalesce(cancelled_at, sqlc.narg(occurred_at)::timestamptz, now()),
    last_occurred_at = greatest(last_occurred_at, sqlc.narg(occurred_at)::timestamptz)
WHERE client = @client AND source = @source AND resource = @resource;

-- name: ResourceCancelSharded :exec
-- ResourceCancel on Citus, which takes no now() within a coalesce on the shards:
-- the transaction's time comes in as a table of one row, evaluated first.
UPDATE resources r
SET cancelled_at = coalesce(r.cancelled_at, sqlc.narg(occurred_at)::timestamptz, t.now),
    last_occurred_at = greatest(r.last_occurred_at, sqlc.narg(occurred_at)::timestamptz)
FROM (SELECT now() AS now) t
WHERE r.client = @client AND r.source = @source AND r.resource = @resource;
