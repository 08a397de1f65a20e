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
-- One small batch of a client's closed actions past its ledger window (the
-- shared one, or the client's own); their attempts and audit go with them,
-- each action's from the partition of its rows_day, and their links by the
-- foreign key. Read through actions_closed_idx, which leads with the client.
WITH old AS (
    SELECT ac.client, ac.id, ac.rows_day FROM actions ac
    WHERE ac.client = @client AND ac.state IN ('confirmed', 'resolved', 'cancelled') AND ac.updated_at < @before
    ORDER BY ac.updated_at
    LIMIT @batch
), attempts_gone AS (
    DELETE FROM attempts t USING old
    WHERE t.client = old.client AND t.action_id = old.id AND t.part_day = old.rows_day
), audit_gone AS (
    DELETE FROM audit u USING old
    WHERE u.client = old.client AND u.action_id = old.id AND u.part_day = old.rows_day
)
DELETE FROM actions a USING old WHERE a.client = old.client AND a.id = old.id;

-- name: EventBodiesDropOfClient :execrows
-- One small batch of a client's event bodies written before @before_day, for a
-- client whose bodies window is shorter than the shared partitions' days: its
-- rows are deleted, the other clients' stay in the same days. Read by
-- event_bodies' key, which leads with the client, in the days before
-- @before_day alone. Bodies still needed stay, by the rule that carries them
-- forward (EventBodiesCarry): an event not routed yet, or linked to an action
-- that is not final.
WITH old AS (
    SELECT b.client, b.event_id, b.day FROM event_bodies b
    JOIN events e ON e.client = b.client AND e.id = b.event_id AND e.body_day = b.day
    WHERE b.client = @client AND b.day < @before_day::date AND e.client = @client AND e.status <> 'received'
      AND NOT EXISTS (
          SELECT 1 FROM action_events ae
          JOIN actions a ON a.client = ae.client AND a.id = ae.action_id
          WHERE ae.client = @client AND a.client = @client AND ae.event_id = e.id
            AND a.state IN ('pending', 'processing', 'retrying', 'held', 'uncertain', 'failed'))
    LIMIT @batch
)
DELETE FROM event_bodies b USING old
WHERE b.client = @client AND b.client = old.client AND b.event_id = old.event_id AND b.day = old.day;

-- name: ResourcePrune :execrows
WITH old AS (
    SELECT rs.client, rs.source, rs.resource FROM resources rs
    WHERE coalesce(rs.last_occurred_at, rs.cancelled_at, '-infinity') < @before
    LIMIT @batch
)
DELETE FROM resources r USING old
WHERE r.client = old.client AND r.source = old.source AND r.resource = old.resource;


-- name: EventBodiesCarry :execrows
-- Carries forward into @to_day a batch of the bytes day @from_day holds that are
-- still needed, before that day's partition is dropped: those of an event not
-- routed yet (received, or put back by a replay) and those of an event linked
-- to an action that is not final (a retry or a correction may read them). The
-- rest go with the partition. Both are found from what is open (the received
-- events' partial index, the open actions' states), never by reading the day.
-- A client whose bodies window is longer than the shared one (@keep_clients,
-- each with the oldest delivery it keeps, @keep_since) keeps the day's bodies
-- its window still holds, counted from their receipt (a body carried forward
-- before is in a later day than it was written), read by the day's key, which
-- leads with the client.
-- On Citus (sharded) one client's a statement.
WITH kept AS (
    SELECT e.client, e.id FROM events e
    WHERE e.status = 'received' AND e.body_day = @from_day::date AND (NOT @sharded::boolean OR e.client = @client)
    UNION
    SELECT b.client, b.event_id FROM event_bodies b
    JOIN (SELECT unnest(@keep_clients::text[]) AS client, unnest(@keep_since::timestamptz[]) AS since) k
      ON k.client = b.client
    JOIN events e ON e.client = b.client AND e.id = b.event_id AND e.received_at >= k.since
    WHERE b.day = @from_day::date AND (NOT @sharded::boolean OR b.client = @client)
    UNION
    SELECT e.client, e.id FROM actions a
    JOIN action_events ae ON ae.client = a.client AND ae.action_id = a.id
    JOIN events e ON e.client = ae.client AND e.id = ae.event_id
    WHERE a.state IN ('pending', 'processing', 'retrying', 'held', 'uncertain', 'failed')
      AND e.body_day = @from_day::date AND (NOT @sharded::boolean OR a.client = @client)
    LIMIT @batch
), moved AS (
    UPDATE event_bodies b SET day = @to_day::date FROM kept
    WHERE b.client = kept.client AND b.event_id = kept.id AND b.day = @from_day::date
)
UPDATE events e SET body_day = @to_day::date FROM kept
WHERE e.client = kept.client AND e.id = kept.id AND e.body_day = @from_day::date;

-- name: ActionRowsLock :many
-- Locks a batch of the actions whose rows are in day @from_day (rows_day), to
-- be carried forward by ActionRowsMove in the same transaction before that
-- day's partitions are dropped: every action still there is still kept (the
-- closed ones past the window are pruned first). An action a worker holds, or
-- that another transaction is changing, is left for the next pass (the worker
-- records into its rows_day), and so is its day. Locked apart from the move, so
-- that the move's own snapshot, taken once the locks are held, sees every
-- attempt and audit line written before: one statement's snapshot, taken
-- before it waits for a row, misses the attempts of a claim and record that
-- commit meanwhile. On Citus (sharded) one client's a statement.
SELECT a.client, a.id FROM actions a
WHERE a.rows_day = @from_day::date AND a.state <> 'processing'
  AND (NOT @sharded::boolean OR a.client = @client)
LIMIT @batch
FOR UPDATE OF a SKIP LOCKED;

-- name: ActionRowsMove :execrows
-- Carries the actions ActionRowsLock locked (@clients, @ids) from day @from_day
-- into @to_day, with their attempts and audit (one Postgres; on Citus
-- ActionRowsMoveOfClient).
WITH kept AS (
    SELECT unnest(@clients::text[]) AS client, unnest(@ids::bigint[]) AS id
), attempts_moved AS (
    UPDATE attempts t SET part_day = @to_day::date FROM kept
    WHERE t.client = kept.client AND t.action_id = kept.id AND t.part_day = @from_day::date
), audit_moved AS (
    UPDATE audit u SET part_day = @to_day::date FROM kept
    WHERE u.client = kept.client AND u.action_id = kept.id AND u.part_day = @from_day::date
)
UPDATE actions a SET rows_day = @to_day::date FROM kept
WHERE a.client = kept.client AND a.id = kept.id AND a.rows_day = @from_day::date;

-- name: ActionRowsMoveOfClient :execrows
-- ActionRowsMove on Citus: the actions ActionRowsLock locked of one @client
-- (@ids), each table by the client and the ids, so that the statement goes to
-- the client's shards alone (a list of pairs would be planned through the
-- coordinator).
WITH attempts_moved AS (
    UPDATE attempts t SET part_day = @to_day::date
    WHERE t.client = @client AND t.action_id = ANY(@ids::bigint[]) AND t.part_day = @from_day::date
), audit_moved AS (
    UPDATE audit u SET part_day = @to_day::date
    WHERE u.client = @client AND u.action_id = ANY(@ids::bigint[]) AND u.part_day = @from_day::date
)
UPDATE actions a SET rows_day = @to_day::date
WHERE a.client = @client AND a.id = ANY(@ids::bigint[]) AND a.rows_day = @from_day::date;

-- name: ActionRowsLeft :one
-- How many actions still have their rows in day @day.
SELECT count(*) FROM actions WHERE rows_day = @day::date;
