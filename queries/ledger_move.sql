-- Moving a client's ledger between oncehook instances (oncehook export and
-- oncehook import --ledger, internal/cutover): each statement names the client,
-- so on Citus each runs on the client's shard. The export reads a page at a time
-- by key, so a ledger of any size is written in bounded memory.

-- name: ExportActions :many
SELECT * FROM actions WHERE client = @client AND id > @after ORDER BY id LIMIT @max_rows;

-- name: ExportEvents :many
-- The client's delivery identities, with their bodies when @with_bodies.
-- The bytes are read from event_bodies, or from the event's own row when it was
-- stored before event_bodies (see EventGetByKey).
SELECT e.id, e.environment, e.source, e.source_event_id, e.type, e.status, e.reason,
       (CASE WHEN @with_bodies::boolean THEN coalesce(b.body, e.body) END)::bytea AS body,
       (CASE WHEN @with_bodies::boolean THEN coalesce(b.payload, e.payload) END)::bytea AS payload,
       e.body_sha256, coalesce(b.headers, e.headers)::jsonb AS headers, e.occurred_at, e.received_at,
       e.last_received_at, e.deliveries, e.conflict, e.routed_at, e.via
FROM events e
LEFT JOIN event_bodies b ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day
WHERE e.client = @client AND e.id > @after ORDER BY e.id LIMIT @max_rows;

-- name: ExportActionEvents :many
SELECT action_id, event_id, params, params_sha256, conflict, linked_at FROM action_events
WHERE client = @client AND (action_id, event_id) > (@after_action::bigint, @after_event::bigint)
ORDER BY action_id, event_id LIMIT @max_rows;

-- name: ExportAudit :many
SELECT id, action_id, actor, act, note, detail, at FROM audit
WHERE client = @client AND id > @after ORDER BY id LIMIT @max_rows;

-- name: ExportSnoozes :many
SELECT action_id, until, snoozed_by, snoozed_at FROM snoozes
WHERE client = @client AND action_id > @after ORDER BY action_id LIMIT @max_rows;

-- name: LedgerActionByOperationKey :one
SELECT id, state, external_ref FROM actions WHERE client = @client AND operation_key = @operation_key;

-- name: LedgerImportAction :one
-- One action of a moved ledger, under a new id; an operation that has an action
-- here already is left as it is and returns nothing.
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key, attempt_key,
                     destination, params, param_values, params_sha256, state, reason, owner, after_id,
                     resource, occurred_at, attempts, max_attempts, give_up_at, next_attempt_at,
                     first_attempt_at, last_attempt_at, external_ref, result, created_at, updated_at,
                     state_since, imported_from, rows_day)
VALUES (@client, @environment, @source, @name, @business_key, @key_parts, @operation_key, @attempt_key,
        @destination, @params, action_param_values(@params), @params_sha256, @state, @reason, @owner,
        sqlc.narg(after_id), @resource, sqlc.narg(occurred_at), @attempts, @max_attempts, @give_up_at,
        @next_attempt_at, sqlc.narg(first_attempt_at), sqlc.narg(last_attempt_at), @external_ref,
        sqlc.narg(result), @created_at, @updated_at, @state_since, @imported_from, @rows_day::date)
ON CONFLICT (client, operation_key) DO NOTHING
RETURNING id;

-- name: LedgerEventBySourceID :one
SELECT id FROM events WHERE client = @client AND source = @source AND source_event_id = @source_event_id;

-- name: LedgerImportEvent :one
-- One delivery identity of a moved ledger, under a new id; one received here
-- already is left as it is and returns nothing. Its bytes follow with
-- LedgerImportEventBody, into @body_day's partition.
INSERT INTO events (client, environment, source, source_event_id, type, status, reason, body_day,
                    body_sha256, occurred_at, received_at, last_received_at, deliveries,
                    conflict, routed_at, via)
VALUES (@client, @environment, @source, @source_event_id, @type, @status, @reason, @body_day::date,
        @body_sha256, sqlc.narg(occurred_at), @received_at,
        @last_received_at, @deliveries, @conflict, sqlc.narg(routed_at), @via)
ON CONFLICT (client, source, source_event_id) DO NOTHING
RETURNING id;

-- name: LedgerImportEventBody :exec
-- The bytes of an event LedgerImportEvent added (body NULL when the file holds
-- none: exported without bodies, or dropped by retention there).
INSERT INTO event_bodies (client, event_id, day, body, payload, headers)
VALUES (@client, @event_id, @day::date, sqlc.narg(body), sqlc.narg(payload), @headers);

-- name: LedgerImportActionEvent :exec
INSERT INTO action_events (client, action_id, event_id, params, params_sha256, conflict, linked_at)
VALUES (@client, @action_id, @event_id, @params, @params_sha256, @conflict, @linked_at)
ON CONFLICT (client, action_id, event_id) DO NOTHING;

-- name: LedgerImportAudit :exec
-- Into the partition of the imported action's rows_day (@part_day).
INSERT INTO audit (client, action_id, actor, act, note, detail, at, part_day)
VALUES (@client, @action_id, @actor, @act, @note, @detail, @at, @part_day);

-- name: LedgerImportSnooze :exec
INSERT INTO snoozes (client, action_id, until, snoozed_by, snoozed_at)
VALUES (@client, @action_id, @until, @snoozed_by, @snoozed_at)
ON CONFLICT (client, action_id) DO NOTHING;
