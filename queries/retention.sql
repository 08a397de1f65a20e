-- name: EventPruneSource :execrows
-- One small batch of delivery identities past the source's remember window, with
-- their links to actions. The actions themselves stay: the ledger outlives deliveries,
-- so a replay after this window is stored again but finds its action done.
WITH old AS (
    SELECT ev.client, ev.id FROM events ev
    WHERE ev.source = @source AND ev.received_at < @before AND ev.status <> 'received'
    ORDER BY ev.received_at
    LIMIT @batch
), links AS (
    DELETE FROM action_events ae USING old WHERE ae.client = old.client AND ae.event_id = old.id
)
DELETE FROM events e USING old WHERE e.client = old.client AND e.id = old.id;

-- name: EventDropBodies :execrows
-- Keeps identity and hash, drops the bytes, for events routed long enough ago
-- whose bytes are still in their own row (stored before event_bodies).
WITH old AS (
    SELECT ev.client, ev.id FROM events ev
    WHERE ev.status <> 'received' AND ev.routed_at < @before AND ev.body IS NOT NULL
    LIMIT @batch
)
UPDATE events e SET body = NULL, payload = NULL FROM old
WHERE e.client = old.client AND e.id = old.id;

-- name: EventBodiesDrop :execrows
-- EventDropBodies for the bytes in event_bodies, row by row.
WITH old AS (
    SELECT b.client, b.event_id, b.day FROM events ev
    JOIN event_bodies b ON b.client = ev.client AND b.event_id = ev.id AND b.day = ev.body_day
    WHERE ev.status <> 'received' AND ev.routed_at < @before
    LIMIT @batch
)
DELETE FROM event_bodies b USING old
WHERE b.client = old.client AND b.event_id = old.event_id AND b.day = old.day;

-- name: ActionPruneClosed :execrows
-- One small batch of closed actions past the ledger window; attempts, audit and
-- links go with them.
WITH old AS (
    SELECT ac.client, ac.id FROM actions ac
    WHERE ac.state IN ('confirmed', 'resolved', 'cancelled') AND ac.updated_at < @before
    ORDER BY ac.updated_at
    LIMIT @batch
)
DELETE FROM actions a USING old WHERE a.client = old.client AND a.id = old.id;

-- name: ResourcePrune :execrows
WITH old AS (
    SELECT rs.client, rs.source, rs.resource FROM resources rs
    WHERE coalesce(rs.last_occurred_at, rs.cancelled_at, '-infinity') < @before
    LIMIT @batch
)
DELETE FROM resources r USING old
WHERE r.client = old.client AND r.source = old.source AND r.resource = old.resource;

