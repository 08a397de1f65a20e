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

-- name: DestinationBreakerOpen :one
-- A closed breaker opens: the one process whose tally tripped it first wins (a
-- conditional update), the others find it open already and get no row. The wait
-- before the first probe is open_for. (Citus allows no function in DO UPDATE
-- SET: the times come from the row that was to be inserted.)
INSERT INTO destinations (name, breaker_state, breaker_since, breaker_reason, breaker_outage_at,
                          breaker_probe_at, breaker_open_for)
VALUES (@name, 'open', now(), @reason, now(),
        now() + make_interval(secs => @open_for::double precision), @open_for::double precision)
ON CONFLICT (name) DO UPDATE
SET breaker_state = 'open', breaker_since = EXCLUDED.breaker_since, breaker_reason = EXCLUDED.breaker_reason,
    breaker_outage_at = EXCLUDED.breaker_outage_at, breaker_probe_at = EXCLUDED.breaker_probe_at,
    breaker_open_for = EXCLUDED.breaker_open_for, breaker_probe_owner = '', breaker_probe_until = NULL
WHERE destinations.breaker_state = 'closed'
RETURNING name, breaker_since;

-- name: DestinationBreakers :many
-- Every destination's breaker, for the workers and the pages.
SELECT name, breaker_state, breaker_since, breaker_reason, breaker_outage_at, breaker_probe_at,
       breaker_open_for, breaker_probe_owner, breaker_probe_until, breaker_last_probe_at, breaker_last_probe
FROM destinations ORDER BY name;

-- name: DestinationBreakerProbeTake :one
-- One process takes the probe of an open breaker whose wait has passed: the
-- breaker is half-open under this worker's lease. The others get no row.
UPDATE destinations
SET breaker_state = 'half_open', breaker_since = now(), breaker_probe_owner = @worker,
    breaker_probe_until = now() + make_interval(secs => @lease_seconds::double precision)
WHERE name = @name AND breaker_state = 'open' AND breaker_probe_at <= now()
RETURNING breaker_open_for;

-- name: DestinationBreakerProbeRetake :one
-- DestinationBreakerProbeTake of a half-open breaker whose prober's lease lapsed
-- (its process died before the answer). (Citus allows no CASE around now(): the
-- two takes are two statements.)
UPDATE destinations
SET breaker_probe_owner = @worker,
    breaker_probe_until = now() + make_interval(secs => @lease_seconds::double precision)
WHERE name = @name AND breaker_state = 'half_open' AND (breaker_probe_until IS NULL OR breaker_probe_until < now())
RETURNING breaker_open_for;

-- name: DestinationBreakerReopen :one
-- The probe found the destination still unwell: open again, for @open_for.
UPDATE destinations
SET breaker_state = 'open', breaker_since = now(), breaker_reason = @reason,
    breaker_probe_at = now() + make_interval(secs => @open_for::double precision),
    breaker_open_for = @open_for::double precision, breaker_probe_owner = '', breaker_probe_until = NULL,
    breaker_last_probe_at = now(), breaker_last_probe = @answer
WHERE name = @name AND breaker_state = 'half_open' AND breaker_probe_owner = @worker
RETURNING name;

-- name: DestinationBreakerClose :one
-- The probe found the destination well: closed, the outage over.
UPDATE destinations
SET breaker_state = 'closed', breaker_since = now(), breaker_reason = '', breaker_outage_at = NULL,
    breaker_probe_at = NULL, breaker_open_for = 0, breaker_probe_owner = '', breaker_probe_until = NULL,
    breaker_last_probe_at = now(), breaker_last_probe = @answer
WHERE name = @name AND breaker_state = 'half_open' AND breaker_probe_owner = @worker
RETURNING name;

-- name: DestinationBreakerHandOpen :exec
-- A person opens the breaker (or keeps it open): its actions are parked as in
-- an outage, and no probe goes before @until (null: none until a person closes
-- it). @open_for is the wait after a probe at @until that finds it unwell.
INSERT INTO destinations (name, breaker_state, breaker_since, breaker_reason, breaker_outage_at,
                          breaker_probe_at, breaker_open_for)
VALUES (@name, 'open', now(), @reason, now(), sqlc.narg(until), @open_for::double precision)
ON CONFLICT (name) DO UPDATE
SET breaker_state = 'open', breaker_since = EXCLUDED.breaker_since, breaker_reason = EXCLUDED.breaker_reason,
    breaker_outage_at = coalesce(destinations.breaker_outage_at, EXCLUDED.breaker_outage_at),
    breaker_probe_at = EXCLUDED.breaker_probe_at, breaker_open_for = EXCLUDED.breaker_open_for,
    breaker_probe_owner = '', breaker_probe_until = NULL;

-- name: DestinationBreakerHandClose :one
-- A person closes the breaker: the outage is over. No row: it was closed.
UPDATE destinations
SET breaker_state = 'closed', breaker_since = now(), breaker_reason = '', breaker_outage_at = NULL,
    breaker_probe_at = NULL, breaker_open_for = 0, breaker_probe_owner = '', breaker_probe_until = NULL
WHERE name = @name AND breaker_state <> 'closed'
RETURNING breaker_state;
