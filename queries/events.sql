-- name: EventInsertBatch :many
-- Stores a batch of deliveries in one statement, or counts repeats of known ones.
-- Each identity appears once (the caller folds repeats inside a batch first: one
-- statement cannot update a row twice); deliveries is how many requests it stands
-- for and conflict whether their bodies differed among themselves. The row's stored
-- body_sha256 comes back so the caller can tell each request's repeat from a conflict.
-- A new event's bytes go to event_bodies, in @day's partition (see migration
-- 00038), in the same statement; a repeat's are not kept (a conflicting one is, in
-- event_conflicts). New events join the router's queue (a trigger on events, see
-- migration 00007) in the same statement, which commits on its own; the routers are woken after the
-- commit (see wakeup.go).
-- A repeat's time is the new row's default (EXCLUDED.last_received_at, now()):
-- Citus allows only immutable functions in an upsert's SET.
-- A backfilled delivery (via 'backfill', listed from the provider's API) never
-- touches a row that is already there; a webhook that follows a backfilled one is
-- counted as its repeat, and the two bodies are not compared: the API's copy of an
-- event is not the bytes the provider signs and posts.
WITH r AS (
    SELECT unnest(@clients::text[]) AS client, unnest(@environments::text[]) AS environment,
           unnest(@sources::text[]) AS source, unnest(@source_event_ids::text[]) AS source_event_id,
           unnest(@types::text[]) AS type, unnest(@bodies::bytea[]) AS body,
           unnest(@payloads::bytea[]) AS payload, unnest(@body_sha256s::bytea[]) AS body_sha256,
           unnest(@headers::jsonb[]) AS headers, unnest(@occurred_ats::text[]) AS occurred_at,
           unnest(@deliveries::integer[]) AS deliveries, unnest(@conflicts::boolean[]) AS conflict,
           unnest(@vias::text[]) AS via
), stored AS (
INSERT INTO events (client, environment, source, source_event_id, type, body_day,
                    body_sha256, occurred_at, deliveries, conflict, via)
SELECT r.client, r.environment, r.source, r.source_event_id, r.type, @day::date,
       r.body_sha256, nullif(r.occurred_at, '')::timestamptz, r.deliveries, r.conflict, r.via
FROM r
ON CONFLICT (client, source, source_event_id) DO UPDATE
SET deliveries       = events.deliveries + CASE WHEN EXCLUDED.via = 'backfill' THEN 0 ELSE EXCLUDED.deliveries END,
    last_received_at = CASE WHEN EXCLUDED.via = 'backfill' THEN events.last_received_at ELSE EXCLUDED.last_received_at END,
    conflict         = events.conflict OR EXCLUDED.conflict
                       OR (events.via = EXCLUDED.via AND events.body_sha256 <> EXCLUDED.body_sha256)
RETURNING id, client, source, source_event_id, (xmax = 0)::boolean AS inserted, body_sha256, via
), bodies AS (
INSERT INTO event_bodies (client, event_id, day, body, payload, headers)
SELECT s.client, s.id, @day::date, r.body, r.payload, r.headers
FROM stored s JOIN r ON r.client = s.client AND r.source = s.source AND r.source_event_id = s.source_event_id
WHERE s.inserted
)
SELECT id, client, source, source_event_id, inserted, body_sha256, via
FROM stored;

-- name: EventInsertOne :one
-- EventInsertBatch for one delivery, the form Citus takes: an INSERT ... SELECT
-- over arrays reads no distributed table, and Citus runs it through the
-- coordinator, while an INSERT of values names its clients and goes to their
-- shards. Ingest sends a batch as this statement with its row of values repeated
-- (db.EventInsertRows), with the same conflict rule and the same row returned; the
-- bytes of the events it made follow (EventBodyInsertOne's form), in the same
-- transaction.
INSERT INTO events (client, environment, source, source_event_id, type, body_day,
                    body_sha256, occurred_at, deliveries, conflict, via)
VALUES (@client, @environment, @source, @source_event_id, @type, @day::date,
        @body_sha256, nullif(@occurred_at::text, '')::timestamptz, @deliveries, @conflict, @via)
ON CONFLICT (client, source, source_event_id) DO UPDATE
SET deliveries       = events.deliveries + CASE WHEN EXCLUDED.via = 'backfill' THEN 0 ELSE EXCLUDED.deliveries END,
    last_received_at = CASE WHEN EXCLUDED.via = 'backfill' THEN events.last_received_at ELSE EXCLUDED.last_received_at END,
    conflict         = events.conflict OR EXCLUDED.conflict
                       OR (events.via = EXCLUDED.via AND events.body_sha256 <> EXCLUDED.body_sha256)
RETURNING id, client, source, source_event_id, (xmax = 0)::boolean AS inserted, body_sha256, via;

-- name: EventBodyInsertOne :exec
-- The bytes of an event EventInsertOne made (not of a repeat): a plain insert of
-- values, which Citus sends to the shard without planning a query on the
-- coordinator (an insert that read events for the id cost the coordinator more
-- than the event's own insert). Ingest sends many rows in one statement of this
-- form (db.EventBodiesInsert); this one is the rows' shape for sqlc.
INSERT INTO event_bodies (client, event_id, day, body, payload, headers)
VALUES (@client, @event_id, @day::date, @body, @payload, @headers);

-- name: EventConflictInsert :exec
INSERT INTO event_conflicts (client, event_id, body, body_sha256, headers)
VALUES (@client, @event_id, @body, @body_sha256, @headers)
ON CONFLICT (client, event_id, body_sha256) DO NOTHING;

-- name: EventGet :one
-- An event by its id alone, with its bytes (see EventGetByKey): one Postgres finds
-- it by events_id_idx; on Citus the reviews read EventGetByKey instead, which goes
-- to the client's shard alone.
SELECT e.id, e.client, e.environment, e.source, e.source_event_id, e.type, e.status, e.reason,
       coalesce(b.body, e.body)::bytea AS body, coalesce(b.payload, e.payload)::bytea AS payload,
       e.body_sha256, coalesce(b.headers, e.headers)::jsonb AS headers, e.occurred_at, e.received_at,
       e.last_received_at, e.deliveries, e.conflict, e.routed_at, e.via, e.body_day
FROM events e
LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
WHERE e.id = @id;

-- name: EventGetByKey :one
-- An event with its bytes: from event_bodies, in the partition its body_day names,
-- or from its own row when it was stored before event_bodies (body_day NULL).
-- body is NULL once retention dropped it. The columns are events' own, in order.
SELECT e.id, e.client, e.environment, e.source, e.source_event_id, e.type, e.status, e.reason,
       coalesce(b.body, e.body)::bytea AS body, coalesce(b.payload, e.payload)::bytea AS payload,
       e.body_sha256, coalesce(b.headers, e.headers)::jsonb AS headers, e.occurred_at, e.received_at,
       e.last_received_at, e.deliveries, e.conflict, e.routed_at, e.via, e.body_day
FROM events e
LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
WHERE e.client = @client AND e.id = @id;

-- name: EventConflictList :many
SELECT * FROM event_conflicts WHERE client = @client AND event_id = @event_id ORDER BY id;

-- name: EventClaimReceived :many
-- The router's claim: received events, oldest first, skipping those another router
-- holds. They leave the queue with the claiming transaction's commit. The events
-- are locked and their status checked as well: a router of the release before
-- event_queue (during a rolling deploy) claims by status, and an event it routed
-- meanwhile is not routed again.
-- A claim takes one client's events (the router goes round the clients, see
-- lanes.go), read from the head of the queue's key.
-- The claimed rows leave the queue by their keys, and their events are read by
-- theirs: the client is a constant of that read only on Citus (sharded), which
-- routes it to one shard (see ActionClaim for why not on a single Postgres). The
-- queue is emptied as fast as it fills, and analyzed while empty it is taken to
-- hold one row, for which a join of the queue to the claimed rows was planned to
-- read the whole queue once per claimed row (the router prices sequential scans
-- out, see db.BeginScanFree).
WITH next AS (
    SELECT id FROM event_queue WHERE client = @client ORDER BY id LIMIT @max_events FOR UPDATE SKIP LOCKED
), claimed AS (
    DELETE FROM event_queue q
    WHERE q.client = @client AND q.id = ANY (ARRAY(SELECT id FROM next))
    RETURNING q.client, q.id
)
SELECT e.id, e.client, e.environment, e.source, e.source_event_id, e.type, e.status, e.reason,
       coalesce(b.body, e.body)::bytea AS body, coalesce(b.payload, e.payload)::bytea AS payload,
       e.body_sha256, coalesce(b.headers, e.headers)::jsonb AS headers, e.occurred_at, e.received_at,
       e.last_received_at, e.deliveries, e.conflict, e.routed_at, e.via, e.body_day
FROM events e JOIN claimed c ON e.client = c.client AND e.id = c.id
LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
WHERE (NOT @sharded::boolean OR e.client = @client) AND e.status = 'received'
ORDER BY e.id
FOR UPDATE OF e;

-- name: EventQueueClients :many
-- The clients with events waiting for the router: the lanes it goes round beside
-- the config's clients.
SELECT DISTINCT client FROM event_queue;

-- name: EventSetStatuses :exec
-- What became of a routed batch of events, in one statement. A batch is one
-- client's, named on Citus (sharded) to route it to the client's shard (see
-- EventClaimReceived).
UPDATE events e
SET status = r.status, reason = r.reason, routed_at = now()
FROM (SELECT unnest(@clients::text[]) AS client, unnest(@ids::bigint[]) AS id,
             unnest(@statuses::text[]) AS status, unnest(@reasons::text[]) AS reason) r
WHERE e.client = r.client AND e.id = r.id AND (NOT @sharded::boolean OR e.client = @client);

-- name: EventList :many
-- Keyset pagination, newest first. Received events are few in a large inbox and no
-- index on events covers their status, so they are found through event_queue, which
-- holds exactly the received ones (routing deletes the queue row and sets the status
-- in one transaction); a search by the provider's event id probes the unique index
-- once per configured (client, source); every other filter walks events by id.
-- Status conflict finds every conflict: a repeat with a different body keeps its
-- event's status (routed, most often) and sets its conflict flag. Each
-- branch runs only for its own filter, and each has its own ORDER BY and LIMIT so
-- that Postgres walks its index instead of sorting the inbox.
SELECT * FROM (
    (SELECT id, client, environment, source, source_event_id, type, status, reason, deliveries,
            conflict, occurred_at, received_at, last_received_at, via
     FROM events
     WHERE @status::text <> 'received' AND @q::text = ''
       AND (@all_clients::boolean OR client = ANY(@scope_clients::text[]))
       AND (@source::text = '' OR source = @source)
       AND (@status::text = '' OR status = @status OR (@status = 'conflict' AND conflict))
       AND (@type::text = '' OR type = @type)
       AND (@via::text = '' OR via = @via)
       AND received_at >= coalesce(sqlc.narg(received_from)::timestamptz, '-infinity')
       AND received_at < coalesce(sqlc.narg(received_to)::timestamptz, 'infinity')
       AND id < coalesce(sqlc.narg(before_id)::bigint, 9223372036854775807)
     ORDER BY id DESC
     LIMIT @max_rows)
    UNION ALL
    (SELECT e.id, e.client, e.environment, e.source, e.source_event_id, e.type, e.status, e.reason,
            e.deliveries, e.conflict, e.occurred_at, e.received_at, e.last_received_at, e.via
     FROM event_queue q
     -- OFFSET 0 keeps the queue driving the join: planned as a plain join, Postgres
     -- may scan the whole inbox for the rare status instead of the small queue.
     CROSS JOIN LATERAL (SELECT * FROM events x
                         WHERE x.client = q.client AND x.id = q.id AND x.status = 'received'
                         OFFSET 0) e
     WHERE @status::text = 'received' AND @q::text = ''
       AND (@all_clients::boolean OR q.client = ANY(@scope_clients::text[]))
       AND (@source::text = '' OR e.source = @source)
       AND (@type::text = '' OR e.type = @type)
       AND (@via::text = '' OR e.via = @via)
       AND e.received_at >= coalesce(sqlc.narg(received_from)::timestamptz, '-infinity')
       AND e.received_at < coalesce(sqlc.narg(received_to)::timestamptz, 'infinity')
       AND q.id < coalesce(sqlc.narg(before_id)::bigint, 9223372036854775807)
     ORDER BY q.id DESC
     LIMIT @max_rows)
    UNION ALL
    (SELECT e.id, e.client, e.environment, e.source, e.source_event_id, e.type, e.status, e.reason,
            e.deliveries, e.conflict, e.occurred_at, e.received_at, e.last_received_at, e.via
     FROM (SELECT unnest(@search_clients::text[]) AS client, unnest(@search_sources::text[]) AS source) s
     JOIN events e ON e.client = s.client AND e.source = s.source AND e.source_event_id = @q
     WHERE @q::text <> ''
       AND (@source::text = '' OR e.source = @source)
       AND (@status::text = '' OR e.status = @status OR (@status = 'conflict' AND e.conflict))
       AND (@type::text = '' OR e.type = @type)
       AND (@via::text = '' OR e.via = @via)
       AND e.received_at >= coalesce(sqlc.narg(received_from)::timestamptz, '-infinity')
       AND e.received_at < coalesce(sqlc.narg(received_to)::timestamptz, 'infinity')
       AND e.id < coalesce(sqlc.narg(before_id)::bigint, 9223372036854775807)
     ORDER BY e.id DESC
     LIMIT @max_rows)
) page
ORDER BY id DESC
LIMIT @max_rows;

-- name: Notify :exec
SELECT pg_notify(@channel::text, '');

-- name: EventReplay :many
-- Puts routed events back in the router's queue, to be routed again with today's
-- rules, in one statement. Events still waiting in the queue, and those whose body
-- was pruned, are left as they are and do not come back.
WITH old AS (
    SELECT e.client, e.id, e.status, e.reason FROM events e
    JOIN (SELECT unnest(@clients::text[]) AS client, unnest(@ids::bigint[]) AS id) r
      ON e.client = r.client AND e.id = r.id
    LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
    WHERE e.status <> 'received' AND (e.body IS NOT NULL OR b.body IS NOT NULL)
    FOR UPDATE OF e
), replayed AS (
    UPDATE events e SET status = 'received', reason = '', routed_at = NULL
    FROM old WHERE e.client = old.client AND e.id = old.id
    RETURNING e.client, e.id
), queued AS (
    INSERT INTO event_queue (client, id) SELECT client, id FROM replayed ON CONFLICT DO NOTHING
)
SELECT old.client, old.id, old.status AS previous_status, old.reason AS previous_reason
FROM old ORDER BY old.id;

-- name: EventReplayOne :many
-- EventReplay for one event on Citus, where a statement over events of many
-- clients cannot lock rows: each statement names the event's client, so it runs
-- on the client's shard.
WITH old AS (
    SELECT e.client, e.id, e.status, e.reason FROM events e
    LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
    WHERE e.client = @client AND e.id = @id AND e.status <> 'received' AND (e.body IS NOT NULL OR b.body IS NOT NULL)
    FOR UPDATE OF e
), replayed AS (
    UPDATE events e SET status = 'received', reason = '', routed_at = NULL
    FROM old WHERE e.client = @client AND old.client = @client AND e.id = old.id
    RETURNING e.client, e.id
), queued AS (
    INSERT INTO event_queue (client, id) SELECT client, id FROM replayed WHERE client = @client
    ON CONFLICT DO NOTHING
)
SELECT old.client, old.id, old.status AS previous_status, old.reason AS previous_reason
FROM old;

-- name: EventAuditInsert :exec
INSERT INTO event_audit (client, event_id, actor, act, note, detail)
SELECT unnest(@clients::text[]), unnest(@event_ids::bigint[]), @actor, @act, @note, unnest(@details::jsonb[]);

-- name: EventAuditList :many
SELECT * FROM event_audit WHERE client = @client AND event_id = @event_id ORDER BY id;

-- name: EventTraceparentOfAction :one
-- The trace context the first event that asked for an action was stored with (its
-- Traceparent identity header, see internal/ledger/trace.go); '' when it has none.
-- Read only while tracing is on.
SELECT coalesce(b.headers->>'Traceparent', e.headers->>'Traceparent', '')::text AS traceparent
FROM action_events ae
JOIN events e ON e.client = ae.client AND e.id = ae.event_id
LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
WHERE ae.client = @client AND ae.action_id = @action_id
ORDER BY ae.event_id
LIMIT 1;
