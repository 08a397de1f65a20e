-- Erasure on request (oncehook erase, POST /api/v1/erase; internal/review/erase.go):
-- what a person asked to be forgotten goes, the identities that keep a redelivery
-- a duplicate stay. Every statement but the first names one client, so on Citus
-- each goes to that client's shard.

-- name: ActionsOfBusinessKey :many
-- The actions of a business key, exactly as it reads, of one client or (client
-- '') of every client: found through actions_business_key_idx.
SELECT client, id FROM actions
WHERE lower(business_key) = lower(@business_key::text) AND business_key = @business_key::text
  AND (@client::text = '' OR client = @client::text)
ORDER BY client, id;

-- name: ActionEventsOfActions :many
-- The events that asked for any of the actions.
SELECT DISTINCT event_id FROM action_events
WHERE client = @client AND action_id = ANY(@action_ids::bigint[])
ORDER BY event_id;

-- name: ActionEventsOfEvent :many
-- The actions an event asked for.
SELECT action_id FROM action_events
WHERE client = @client AND event_id = @event_id
ORDER BY action_id;

-- name: EventEraseLock :many
-- The events an erasure changes, locked against a replay meanwhile, each with
-- the day of its body.
SELECT id, status, body_day FROM events
WHERE client = @client AND id = ANY(@ids::bigint[])
ORDER BY id
FOR UPDATE;

-- name: EventsErased :many
-- Which of the events were erased already (Citus locks no rows in a statement
-- that reads another table beside them, so this is its own).
SELECT DISTINCT event_id FROM event_audit
WHERE client = @client AND event_id = ANY(@ids::bigint[]) AND act = 'erase';

-- name: ActionEraseLock :many
-- The actions an erasure changes, locked against a worker's or a person's act
-- meanwhile, each with its key.
SELECT id, name, state, business_key, key_parts FROM actions
WHERE client = @client AND id = ANY(@ids::bigint[])
ORDER BY id
FOR UPDATE;

-- name: ActionsErased :many
-- Which of the actions were erased already (through another of their events).
SELECT DISTINCT action_id FROM audit
WHERE client = @client AND action_id = ANY(@ids::bigint[]) AND act = 'erase';

-- name: EventErase :exec
-- An erased event keeps its identity (source, source_event_id, body_sha256), so
-- a redelivery is still a duplicate; its bytes and headers go.
UPDATE events SET body = NULL, payload = NULL, headers = '{}'
WHERE client = @client AND id = ANY(@ids::bigint[]);

-- name: EventBodyErase :exec
-- The erased events' bytes, in the partitions of their days.
DELETE FROM event_bodies
WHERE client = @client AND event_id = ANY(@ids::bigint[]) AND day = ANY(@days::date[]);

-- name: EventConflictErase :exec
-- The differing repeats kept as evidence of the erased events.
DELETE FROM event_conflicts WHERE client = @client AND event_id = ANY(@ids::bigint[]);

-- name: ActionEventErase :exec
-- The params each erased event asked for, and those each erased action was asked
-- for with. params_sha256 stays: a later event that asks for the same operation
-- with the same params is linked as before, not taken for a conflict.
UPDATE action_events SET params = '{}'
WHERE client = @client AND (event_id = ANY(@event_ids::bigint[]) OR action_id = ANY(@action_ids::bigint[]))
  AND params <> '{}';

-- name: ActionErase :exec
-- An erased action keeps its operation key (an opaque hash, what the destination
-- knows it by), so a later event asking for the same operation finds it; its key
-- parts become their hashes, its params and the destination's reply go.
-- param_values follows params (its trigger).
UPDATE actions SET business_key = @business_key::text, key_parts = @key_parts, params = '{}', result = NULL,
       reason = replace(reason, @old_business_key::text, @business_key::text)
WHERE client = @client AND id = @id;

-- name: EventReasonErase :exec
-- A router's note on an event that quotes an erased business key.
UPDATE events SET reason = replace(reason, @old_business_key::text, @business_key::text)
WHERE client = @client AND id = ANY(@ids::bigint[]) AND strpos(reason, @old_business_key::text) > 0;

-- name: AttemptErase :exec
-- The destination's words about the erased actions' calls (an error or a
-- reply's excerpt may quote the params); what was observed and its status stay.
UPDATE attempts SET error = '', evidence = ''
WHERE client = @client AND action_id = ANY(@action_ids::bigint[]) AND (error <> '' OR evidence <> '');

-- name: AuditErase :exec
-- A correction's audit line holds the params before and after: they go. A
-- router's note that quotes the business key quotes its hash instead.
UPDATE audit SET detail = detail - 'original' - 'corrected',
       note = replace(note, @old_business_key::text, @business_key::text)
WHERE client = @client AND action_id = @action_id
  AND (act = 'correct' OR strpos(note, @old_business_key::text) > 0);

-- name: CorrectionErase :exec
-- A correction's params, before and after.
UPDATE corrections SET original = '{}', params = '{}'
WHERE client = @client AND action_id = ANY(@action_ids::bigint[]);
