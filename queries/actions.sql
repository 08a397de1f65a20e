-- name: ActionInsert :many
-- Creates the action for each operation identity given unless it exists, in one
-- statement: for one event's rule, or for a run of independent events. Rows are
-- inserted in the order given, so of two rows for one operation the first creates
-- the action. A successor (after_id, 0 for none) waits (next_attempt_at far in the
-- future) until its predecessor is confirmed; an action for a disconnected
-- destination starts held, and one a cutover window covers in the state and with
-- the reason its row gives (cutover_state, '' for none: uncertain to look it up
-- first, failed for a person); the decision table's rows for a new action give
-- these states. It returns the operations it created; an operation that
-- already existed, or that an earlier row created, returns nothing.
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
                     destination, params, param_values, params_sha256, state, reason, owner, after_id,
                     resource, occurred_at, max_attempts, give_up_at, next_attempt_at)
SELECT r.client, r.environment, r.source, r.name, r.business_key, r.key_parts, r.operation_key,
       r.destination, r.params, action_param_values(r.params), r.params_sha256,
       CASE WHEN r.cutover_state <> '' THEN r.cutover_state
            WHEN d.disconnected THEN @held_state::text ELSE @ready_state::text END,
       CASE WHEN r.cutover_state <> '' THEN r.cutover_reason
            WHEN d.disconnected THEN 'destination ' || r.destination || ' is disconnected'
            WHEN r.after_id <> 0 AND p.state IS DISTINCT FROM 'confirmed'
                 THEN 'waiting for ' || coalesce(p.name, 'its predecessor')
            ELSE '' END,
       r.owner, nullif(r.after_id, 0), r.resource, CASE WHEN r.has_occurred_at THEN r.occurred_at END,
       r.max_attempts, now() + make_interval(secs => r.within_seconds),
       CASE WHEN r.after_id = 0 OR p.state IN ('confirmed', 'resolved') THEN now()
            ELSE '9999-12-31 00:00:00+00'::timestamptz END
-- The predecessors are read first, by key (client and id), then joined to the
-- rows: a lateral lookup per row in a distributed table is a join Citus cannot
-- plan (the reference table of destinations it can).
FROM (SELECT unnest(@clients::text[]) AS client, unnest(@environments::text[]) AS environment,
             unnest(@sources::text[]) AS source, unnest(@names::text[]) AS name,
             unnest(@business_keys::text[]) AS business_key, unnest(@key_parts::jsonb[]) AS key_parts,
             unnest(@operation_keys::text[]) AS operation_key, unnest(@destinations::text[]) AS destination,
             unnest(@params::jsonb[]) AS params, unnest(@params_sha256s::bytea[]) AS params_sha256,
             unnest(@owners::text[]) AS owner, unnest(@after_ids::bigint[]) AS after_id,
             unnest(@resources::text[]) AS resource,
             unnest(@occurred_ats::timestamptz[]) AS occurred_at,
             unnest(@has_occurred_ats::boolean[]) AS has_occurred_at,
             unnest(@max_attempts::integer[]) AS max_attempts,
             unnest(@within_seconds::double precision[]) AS within_seconds,
             unnest(@cutover_states::text[]) AS cutover_state, unnest(@cutover_reasons::text[]) AS cutover_reason,
             generate_subscripts(@clients::text[], 1) AS ord) r
CROSS JOIN LATERAL (SELECT EXISTS (SELECT 1 FROM destinations x
                                   WHERE x.name = r.destination AND x.status = 'disconnected')
                    AS disconnected) d
LEFT JOIN (SELECT x.client, x.id, x.state, x.name FROM actions x
           WHERE x.client = ANY(@clients::text[]) AND x.id = ANY(@after_ids::bigint[]) OFFSET 0) p
       ON p.client = r.client AND p.id = r.after_id
ORDER BY r.ord
ON CONFLICT (client, operation_key) DO NOTHING
RETURNING client, operation_key, id;

-- name: ActionInsertOne :batchmany
-- ActionInsert for one operation, on Citus, where an INSERT ... SELECT over arrays
-- runs through the coordinator: an INSERT of one row names its client and runs on
-- the client's shard. The caller reads the predecessor and the destination first
-- and gives the state and reason the decision table's rows for a new action give
-- (ActionInsert's CASEs), and whether it is due now. The rows of a run are sent
-- together in ActionInsert's order, so of two rows for one operation the first
-- creates the action; it returns the row only when it created it.
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
                     destination, params, param_values, params_sha256, state, reason, owner, after_id,
                     resource, occurred_at, max_attempts, give_up_at, next_attempt_at)
VALUES (@client, @environment, @source, @name, @business_key, @key_parts, @operation_key,
        @destination, @params, action_param_values(@params), @params_sha256, @state, @reason, @owner,
        sqlc.narg(after_id), @resource, sqlc.narg(occurred_at), @max_attempts,
        now() + make_interval(secs => @within_seconds::double precision),
        CASE WHEN @due::boolean THEN now() ELSE '9999-12-31 00:00:00+00'::timestamptz END)
ON CONFLICT (client, operation_key) DO NOTHING
RETURNING client, operation_key, id;

-- name: ActionGetByKey :one
-- An action by its key: the workers know the client, which routes the read to the
-- client's shard on Citus.
SELECT * FROM actions WHERE client = @client AND id = @id;

-- name: ActionGetByOperationKey :one
SELECT * FROM actions WHERE client = @client AND operation_key = @operation_key;

-- name: ActionGet :one
-- An action by its id alone: one Postgres finds it by actions_id_idx; on Citus
-- the reviews read ActionGetByKey instead, which goes to the client's shard alone.
SELECT * FROM actions WHERE id = @id;

-- name: ActionEventLinks :exec
-- Links a routed batch of events to the actions they asked for, in one statement.
INSERT INTO action_events (client, action_id, event_id, params, params_sha256, conflict)
SELECT r.client, r.action_id, r.event_id, r.params, r.params_sha256, r.conflict
FROM (SELECT unnest(@clients::text[]) AS client, unnest(@action_ids::bigint[]) AS action_id,
             unnest(@event_ids::bigint[]) AS event_id, unnest(@params::jsonb[]) AS params,
             unnest(@params_sha256s::bytea[]) AS params_sha256,
             unnest(@conflicts::boolean[]) AS conflict) r
ON CONFLICT (client, action_id, event_id) DO NOTHING;

-- name: ActionEventLinkOne :batchexec
-- ActionEventLinks for one link, on Citus (see ActionInsertOne): the links of a
-- batch are sent together.
INSERT INTO action_events (client, action_id, event_id, params, params_sha256, conflict)
VALUES (@client, @action_id, @event_id, @params, @params_sha256, @conflict)
ON CONFLICT (client, action_id, event_id) DO NOTHING;

-- name: ActionEventList :many
SELECT ae.event_id, ae.params, ae.conflict, ae.linked_at, e.source, e.source_event_id, e.type,
       e.status, e.deliveries, e.conflict AS event_conflict, e.received_at
FROM action_events ae
JOIN events e ON e.client = ae.client AND e.id = ae.event_id
WHERE ae.client = @client AND ae.action_id = @action_id
ORDER BY ae.linked_at, ae.event_id;

-- name: ActionListByEvent :many
SELECT a.* FROM action_events ae
JOIN actions a ON a.client = ae.client AND a.id = ae.action_id
WHERE ae.client = @client AND ae.event_id = @event_id
ORDER BY a.id;

-- name: ActionRecordRouted :exec
-- The router's decision for an action it links an event to: a new event asked for
-- this operation with different params, or the event cannot fill a param of the
-- action it just created. The decision table's state (a person decides), unless the
-- action is already performed or closed.
UPDATE actions
SET state = @state, reason = @reason, next_attempt_at = @next_attempt_at, updated_at = now()
WHERE client = @client AND id = @id AND state = ANY(@states::text[]);

-- name: ActionCancelByResource :many
-- A cancelling event: actions of the resource that have not been performed yet.
UPDATE actions
SET state = 'cancelled', reason = @reason, updated_at = now(), next_attempt_at = now()
WHERE client = @client AND source = @source AND resource = @resource
  AND name = ANY(@names::text[]) AND state = ANY(@states::text[])
RETURNING id;

-- name: ActionClaim :many
-- Claims due work under a lease. Pending and retrying actions are called; uncertain
-- ones are reconciled. Actions of a disconnected destination are left alone. The
-- same statement starts the calls it can (a destination this worker has, params
-- that need no predecessor's result): it counts the attempt on the action and
-- writes the attempt as started, and the caller commits before calling anyone.
-- attempt_id is 0 for the claims it did not start. only_destinations (when not
-- empty or null) and skip_destinations narrow it to some destinations. A claim
-- takes one client's work (the performer goes round the clients, see lanes.go).
WITH due AS (
    SELECT a.client, a.id, a.state, now() AS at,
           a.state <> 'uncertain' AND a.destination = ANY(@callable::text[])
               AND (a.after_id IS NULL OR NOT a.name = ANY(@fill_names::text[])) AS starts
    FROM actions a
    WHERE a.client = @client AND a.state IN ('pending', 'retrying', 'uncertain')
      AND a.next_attempt_at <= now()
      -- Nor are the actions of a destination whose breaker is open (ActionPark).
      AND NOT EXISTS (SELECT 1 FROM destinations d
                      WHERE d.name = a.destination AND (d.status = 'disconnected' OR d.breaker_state <> 'closed'))
      -- A destination with limits is claimed on its own, for its free room only.
      AND (coalesce(cardinality(@only_destinations::text[]), 0) = 0 OR a.destination = ANY(@only_destinations::text[]))
      AND a.destination <> ALL(coalesce(@skip_destinations::text[], '{}'))
    ORDER BY a.next_attempt_at, a.id
    LIMIT @max_actions
    FOR UPDATE OF a SKIP LOCKED
), claimed AS (
    UPDATE actions a
    SET state = 'processing', claimed_from = due.state, lease_owner = @worker::text,
        lease_token = a.lease_token + 1, parked_at = NULL,
        lease_expires_at = now() + make_interval(secs => @lease_seconds::double precision),
        attempts = a.attempts + CASE WHEN due.starts THEN 1 ELSE 0 END,
        -- The time is a column (due.at): Citus allows no function that is not
        -- immutable inside a CASE or coalesce.
        first_attempt_at = CASE WHEN due.starts THEN coalesce(a.first_attempt_at, due.at) ELSE a.first_attempt_at END,
        last_attempt_at = CASE WHEN due.starts THEN due.at ELSE a.last_attempt_at END,
        updated_at = now()
    FROM due
    -- Each claimed row is looked up by its key. On Citus (sharded, planned for
    -- each call) the client is a constant of the update too, which routes it to
    -- the claim's one shard. On a single Postgres it is not: with it, a plan made
    -- while the table was small (or its statistics said so) read every action of
    -- the client for each claim.
    WHERE a.client = due.client AND a.id = due.id AND (NOT @sharded::boolean OR a.client = @client)
    RETURNING a.*, due.starts
), attempt AS (
    INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
    SELECT @client, c.id, 'call', sent_key(c.attempt_key, c.operation_key), @worker::text, c.rows_day
    FROM claimed c WHERE c.starts
    RETURNING client, id, action_id
)
SELECT c.*, coalesce(t.id, 0)::bigint AS attempt_id
FROM claimed c LEFT JOIN attempt t ON t.client = c.client AND t.action_id = c.id;

-- name: ActionClaimSharded :many
-- ActionClaim on Citus, where an insert that selects from the rows a statement
-- updated (ActionClaim's attempts) runs through the coordinator: the same claim
-- of one client's due work, on the client's shard, which returns the claims and
-- whether each starts a call (attempt_id 0); the caller writes the started
-- attempts next (AttemptStartEach), in the claim's transaction.
WITH due AS (
    SELECT a.client, a.id, a.state, now() AS at,
           a.state <> 'uncertain' AND a.destination = ANY(@callable::text[])
               AND (a.after_id IS NULL OR NOT a.name = ANY(@fill_names::text[])) AS starts
    FROM actions a
    WHERE a.client = @client AND a.state IN ('pending', 'retrying', 'uncertain')
      AND a.next_attempt_at <= now()
      -- Nor are the actions of a destination whose breaker is open (ActionPark).
      AND NOT EXISTS (SELECT 1 FROM destinations d
                      WHERE d.name = a.destination AND (d.status = 'disconnected' OR d.breaker_state <> 'closed'))
      AND (coalesce(cardinality(@only_destinations::text[]), 0) = 0 OR a.destination = ANY(@only_destinations::text[]))
      AND a.destination <> ALL(coalesce(@skip_destinations::text[], '{}'))
    ORDER BY a.next_attempt_at, a.id
    LIMIT @max_actions
    FOR UPDATE OF a SKIP LOCKED
), claimed AS (
    UPDATE actions a
    SET state = 'processing', claimed_from = due.state, lease_owner = @worker::text,
        lease_token = a.lease_token + 1, parked_at = NULL,
        lease_expires_at = now() + make_interval(secs => @lease_seconds::double precision),
        attempts = a.attempts + CASE WHEN due.starts THEN 1 ELSE 0 END,
        first_attempt_at = CASE WHEN due.starts THEN coalesce(a.first_attempt_at, due.at) ELSE a.first_attempt_at END,
        last_attempt_at = CASE WHEN due.starts THEN due.at ELSE a.last_attempt_at END,
        updated_at = now()
    FROM due
    WHERE a.client = due.client AND a.id = due.id AND a.client = @client
    RETURNING a.*, due.starts
)
SELECT c.*, 0::bigint AS attempt_id FROM claimed c;

-- name: ActionPark :execrows
-- The client's due actions of a destination whose breaker is open are parked
-- until @until, past the breaker's next probe: they keep their state, and the
-- claims that follow do not read them again. parked_at keeps when each became
-- due (ActionReleaseParked).
UPDATE actions
SET parked_at = coalesce(parked_at, next_attempt_at), next_attempt_at = @until
WHERE client = @client AND destination = @destination
  AND state IN ('pending', 'retrying', 'uncertain') AND next_attempt_at <= now()
  -- The caller's copy of the breakers may be a moment old: one that has closed
  -- since (and released what it parked) parks nothing.
  AND EXISTS (SELECT 1 FROM destinations d WHERE d.name = @destination AND d.breaker_state <> 'closed');

-- name: ActionReleaseParked :execrows
-- A closed breaker releases its destination's parked actions: each is due again
-- from when it first became due (so the oldest go first, in the order they
-- were due) and its elapsed-time budget moves later by the time it was parked.
-- On Citus (sharded) it releases one client's a statement, on its shard.
-- (Citus calls no function that is not immutable with a column in an update's
-- SET, and adding an interval to a timestamptz is only stable: the sums are
-- made in UTC, and the time is the caller's.)
UPDATE actions
SET next_attempt_at = least(parked_at, sqlc.arg(released_at)::timestamptz),
    give_up_at = ((give_up_at AT TIME ZONE 'UTC')
                  + greatest(sqlc.arg(released_at)::timestamptz AT TIME ZONE 'UTC' - (parked_at AT TIME ZONE 'UTC'), interval '0'))
                 AT TIME ZONE 'UTC',
    parked_at = NULL
WHERE destination = @destination AND parked_at IS NOT NULL
  AND (NOT @sharded::boolean OR client = @client);

-- name: ActionProbePick :one
-- The action a half-open breaker probes with: the oldest parked uncertain one
-- where a lookup can reconcile it (reconcile before any repeat), else the
-- oldest parked one to call.
SELECT client, id FROM actions
WHERE destination = @destination AND parked_at IS NOT NULL
  AND state IN ('pending', 'retrying', 'uncertain')
  AND (@has_lookup::boolean OR state <> 'uncertain')
ORDER BY (state = 'uncertain') DESC, id
LIMIT 1;

-- name: ActionClaimProbe :one
-- Claims the probe's action under a lease, as a claim does, but spends none of
-- its budget: its attempts are not counted. The time is the caller's: Citus
-- allows no function that is not immutable inside coalesce.
UPDATE actions
SET state = 'processing', claimed_from = state, lease_owner = @worker::text, lease_token = lease_token + 1,
    lease_expires_at = now() + make_interval(secs => @lease_seconds::double precision),
    first_attempt_at = coalesce(first_attempt_at, @now::timestamptz), last_attempt_at = now(), updated_at = now()
WHERE client = @client AND id = @id AND state IN ('pending', 'retrying', 'uncertain')
RETURNING *;

-- name: ActionClientsWithWork :many
-- The clients with actions to claim, leases to recover or held actions to release:
-- the lanes the performer goes round beside the config's clients.
SELECT DISTINCT client FROM actions WHERE state IN ('pending', 'retrying', 'uncertain', 'processing', 'held');

-- name: ActionRenewLease :execrows
UPDATE actions
SET lease_expires_at = now() + make_interval(secs => @lease_seconds::double precision)
WHERE client = @client AND id = @id AND state = 'processing' AND lease_owner = @worker
  AND lease_token = @lease_token;

-- name: ActionStartCalls :many
-- Starts a call on each of a claimed batch, in one statement: counts the attempt on
-- the action and writes the attempt as started, only while this worker still holds
-- the lease. The caller commits this before any destination hears anything.
-- It runs in the claim's transaction, with a generic plan made with lookups by key
-- (the performer switches the transaction to them first, see db.PlanByKey): the
-- state is checked on each row found by its key, never read from an index of
-- states (see ActionRecordBatch). Its calls are one client's, named on Citus
-- (sharded) to route it to the client's shard, as ActionRecordBatch's are.
WITH started AS (
    UPDATE actions a
    SET attempts = a.attempts + 1, first_attempt_at = coalesce(a.first_attempt_at, r.at),
        last_attempt_at = now(), updated_at = now()
    FROM (SELECT unnest(@clients::text[]) AS client, unnest(@ids::bigint[]) AS id, now() AS at) r
    WHERE a.client = r.client AND a.id = r.id AND (a.state = 'processing') IS TRUE AND a.lease_owner = @worker::text
      AND (NOT @sharded::boolean OR a.client = @client)
    RETURNING a.client, a.id, sent_key(a.attempt_key, a.operation_key)::text AS operation_key,
              a.attempts, a.first_attempt_at, a.rows_day
), attempt AS (
    INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
    SELECT s.client, s.id, 'call', s.operation_key, @worker::text, s.rows_day FROM started s
    RETURNING client, id, action_id
)
SELECT s.client, s.id, s.attempts, s.first_attempt_at, t.id AS attempt_id
FROM started s JOIN attempt t ON t.client = s.client AND t.action_id = s.id;

-- name: ActionStartCallsSharded :many
-- ActionStartCalls on Citus (see ActionClaimSharded): counts the attempts on one
-- client's actions, on the client's shard, and returns what the caller writes the
-- started attempts with (AttemptStartEach), in the same transaction.
UPDATE actions a
SET attempts = a.attempts + 1, first_attempt_at = coalesce(a.first_attempt_at, r.at),
    last_attempt_at = now(), updated_at = now()
FROM (SELECT unnest(@clients::text[]) AS client, unnest(@ids::bigint[]) AS id, now() AS at) r
WHERE a.client = r.client AND a.id = r.id AND (a.state = 'processing') IS TRUE AND a.lease_owner = @worker::text
  AND a.client = @client
RETURNING a.client, a.id, a.attempt_key, a.operation_key, a.attempts, a.first_attempt_at, a.rows_day;

-- name: ActionRecordBatch :many
-- Records a group of decisions in one statement: each
-- attempt's evidence (attempt_id 0: none), and each action's next state, only while
-- this worker still holds the lease of that very claim (its token); the successors
-- of the actions confirmed become due. It returns the actions recorded, each with
-- how many successors the whole group released.
-- It is prepared, with one generic plan per connection made with lookups by key
-- (db.KeyPlanned): planning it for each call cost half as much as running it.
-- Every row it touches is found by its key, whatever the tables held when the plan
-- was made:
-- - conditions on an action's state are tested with IS TRUE, which no index
--   answers: a plan that reads the 'processing' entries of actions_state_idx or
--   actions_lease_idx (taken to be few) reads every claim since the last vacuum,
--   for each entry is left dead when its action is recorded, and one that reads
--   the waiting successors by their far-future next_attempt_at (actions_due_idx)
--   reads every successor waiting and every one released since the last vacuum;
-- - an attempt is named by its whole key, attempts' primary key (client,
--   action_id, id, part_day): named by client and id only, a plan made on an empty
--   table read every attempt of the client, and without its action's rows_day
--   (@rows_days, the claim's) it is looked for in every day's partition;
-- - successors are found for each confirmed action in a subquery of their own
--   (OFFSET 0 keeps it one), a lookup in actions_after_idx: joined to the recorded
--   actions, a plan made on a small table read the whole partial index, every
--   action that ever had a predecessor.
-- On Citus (sharded, planned for each call) the performer records one client's
-- outcomes a statement, and the client is a constant of each table's rows, which
-- routes it to the client's shard; on a single Postgres the condition is no index's
-- to answer (see above).
WITH r AS (
    SELECT unnest(@clients::text[]) AS client, unnest(@ids::bigint[]) AS id,
           unnest(@attempt_ids::bigint[]) AS attempt_id, unnest(@observed::text[]) AS observed,
           unnest(@http_statuses::integer[]) AS http_status, unnest(@errors::text[]) AS error,
           unnest(@states::text[]) AS state, unnest(@reasons::text[]) AS reason,
           unnest(@next_attempt_ats::timestamptz[]) AS next_attempt_at,
           unnest(@external_refs::text[]) AS external_ref, unnest(@results::text[]) AS result,
           unnest(@owners::text[]) AS owner, unnest(@lease_tokens::bigint[]) AS lease_token,
           unnest(@attempts_back::integer[]) AS attempts_back,
           unnest(@rows_days::date[]) AS rows_day
), finished AS (
    UPDATE attempts t
    SET status = 'finished', observed = r.observed, http_status = nullif(r.http_status, 0),
        error = r.error, evidence = r.external_ref, finished_at = now()
    FROM r
    WHERE r.attempt_id <> 0 AND t.client = r.client AND t.action_id = r.id AND t.id = r.attempt_id
      AND t.part_day = r.rows_day AND (NOT @sharded::boolean OR t.client = @client)
    RETURNING t.id
), recorded AS (
    UPDATE actions a
    SET state = r.state, reason = r.reason, next_attempt_at = r.next_attempt_at,
        -- attempts_back: the claim counted an attempt that never went out (Decision.GiveBack).
        attempts = a.attempts - coalesce(r.attempts_back, 0),
        external_ref = CASE WHEN r.external_ref <> '' THEN r.external_ref ELSE a.external_ref END,
        result = coalesce(nullif(r.result, '')::jsonb, a.result),
        owner = CASE WHEN r.owner <> '' THEN r.owner ELSE a.owner END,
        lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    FROM r
    WHERE a.client = r.client AND a.id = r.id AND (a.state = 'processing') IS TRUE AND a.lease_owner = @worker::text
      AND a.lease_token = r.lease_token AND (NOT @sharded::boolean OR a.client = @client)
    RETURNING a.client, a.id, a.state
), released AS (
    -- A successor waits pending, or uncertain when a cutover makes it look its
    -- operation up first (it keeps that reason).
    UPDATE actions s
    SET next_attempt_at = now(), reason = CASE WHEN s.state = 'pending' THEN '' ELSE s.reason END, updated_at = now()
    FROM recorded p
    CROSS JOIN LATERAL (SELECT w.client, w.id FROM actions w
                        WHERE w.client = p.client AND w.after_id = p.id
                          AND (NOT @sharded::boolean OR w.client = @client) OFFSET 0) x
    WHERE p.state = 'confirmed' AND s.client = x.client AND s.id = x.id
      AND (NOT @sharded::boolean OR s.client = @client)
      AND (s.state IN ('pending', 'uncertain')) IS TRUE
      AND (s.next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz) IS TRUE
    RETURNING s.id
)
SELECT recorded.client, recorded.id, (SELECT count(*) FROM released)::bigint AS released
FROM recorded;

-- name: ActionReleaseSuccessors :execrows
-- The predecessor is confirmed: its waiting successors become due (one a cutover
-- made uncertain keeps its reason: it is looked up first).
UPDATE actions
SET next_attempt_at = now(), reason = CASE WHEN state = 'pending' THEN '' ELSE reason END, updated_at = now()
WHERE client = @client AND after_id = @after_id AND state IN ('pending', 'uncertain')
  AND next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz;

-- name: ActionLockExpiredLeases :many
-- Locks up to 100 of a client's actions whose lease expired, with what the decision table needs
-- to know of each: whether a call was started under the lease (it may have reached
-- the destination) and what the claim was for (claimed_from). The caller decides
-- and writes the outcome with ActionRecoverLeases in the same transaction.
SELECT sqlc.embed(a),
       EXISTS (SELECT 1 FROM attempts t
               WHERE t.client = @client AND t.action_id = a.id AND t.part_day = a.rows_day
                 AND t.status = 'started' AND t.kind = 'call') AS call_started
FROM actions a
WHERE a.client = @client AND a.state = 'processing' AND a.lease_expires_at < now()
ORDER BY a.lease_expires_at
LIMIT 100
FOR UPDATE OF a SKIP LOCKED;

-- name: ActionRecoverLeases :many
-- Writes the decision for each expired lease ActionLockExpiredLeases locked. A
-- lookup the gone worker started proves nothing: it is closed as abandoned here (its
-- action was uncertain and stays so), while a started call is closed with its audit
-- entry by AttemptAbandonStarted. On Citus (sharded) it writes one client's
-- leases a statement, named to route it to the client's shard.
WITH r AS (
    SELECT unnest(@clients::text[]) AS client, unnest(@ids::bigint[]) AS id,
           unnest(@states::text[]) AS state, unnest(@reasons::text[]) AS reason,
           unnest(@next_attempt_ats::timestamptz[]) AS next_attempt_at,
           unnest(@rows_days::date[]) AS rows_day
), lookups AS (
    UPDATE attempts t
    SET status = 'abandoned', observed = 'lease expired', finished_at = now()
    FROM r
    WHERE t.client = r.client AND t.action_id = r.id AND t.part_day = r.rows_day
      AND t.status = 'started' AND t.kind = 'lookup' AND (NOT @sharded::boolean OR t.client = @client)
)
UPDATE actions a
SET state = r.state, reason = r.reason, next_attempt_at = r.next_attempt_at,
    lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
FROM r
WHERE a.client = r.client AND a.id = r.id AND a.state = 'processing'
  AND (NOT @sharded::boolean OR a.client = @client)
RETURNING a.client, a.id, a.state;

-- name: ActionReleaseLeases :many
-- A worker shutting down hands back the claims it never started a call for. A
-- lookup it started and did not finish proves nothing: it is closed as abandoned
-- (its action was uncertain and goes back to uncertain). On Citus (sharded) it
-- hands back one client's claims a statement, on the client's shard.
WITH released AS (
    UPDATE actions a
    SET state = a.claimed_from, lease_owner = NULL, lease_expires_at = NULL, updated_at = now()
    WHERE a.state = 'processing' AND a.lease_owner = @worker
      AND (NOT @sharded::boolean OR a.client = @client)
      AND NOT EXISTS (SELECT 1 FROM attempts t WHERE t.client = a.client AND t.action_id = a.id
                      AND t.part_day = a.rows_day AND t.status = 'started' AND t.kind = 'call')
    RETURNING a.client, a.id, a.rows_day
), lookups AS (
    UPDATE attempts t
    SET status = 'abandoned', observed = 'the worker stopped during the lookup', finished_at = now()
    FROM released r
    WHERE t.client = r.client AND t.action_id = r.id AND t.part_day = r.rows_day
      AND t.status = 'started' AND t.kind = 'lookup'
      AND (NOT @sharded::boolean OR t.client = @client)
)
SELECT id FROM released;

-- name: ActionHoldDestination :many
-- On Citus (sharded) it holds one client's actions a statement, on the client's
-- shard.
UPDATE actions
SET state = 'held', reason = @reason, updated_at = now()
WHERE destination = @destination AND state = ANY(@states::text[])
  AND (NOT @sharded::boolean OR client = @client)
RETURNING id;

-- name: ActionReleaseHeld :many
UPDATE actions
SET state = 'pending', reason = '', next_attempt_at = now(), updated_at = now()
WHERE destination = @destination AND state = 'held'
RETURNING client, id;

-- name: ActionReleaseStrayHeld :many
-- Held actions of a destination that is connected: created held by a router whose
-- transaction read the destination as disconnected and committed only after the
-- reconnect had released the others. Recovery releases them too. On Citus
-- (sharded) it releases one client's a statement, on the client's shard.
UPDATE actions a
SET state = 'pending', reason = '', next_attempt_at = now(), updated_at = now()
WHERE a.state = 'held' AND (NOT @sharded::boolean OR a.client = @client)
  AND NOT EXISTS (SELECT 1 FROM destinations d WHERE d.name = a.destination AND d.status = 'disconnected')
RETURNING a.id;

-- name: ActionManualRetry :one
-- A person asks for a retry: same operation key, a fresh budget; next_state is
-- pending (call) or uncertain (look the operation up first), as Review decides.
UPDATE actions
SET state = @next_state::text, reason = @reason, next_attempt_at = now(),
    max_attempts = attempts + @budget_attempts,
    give_up_at = now() + make_interval(secs => @within_seconds::double precision),
    updated_at = now()
WHERE client = @client AND id = @id AND state = ANY(@states::text[])
RETURNING *;

-- name: ActionManualReconcile :one
UPDATE actions
SET state = 'uncertain', reason = @reason, next_attempt_at = now(), updated_at = now()
WHERE client = @client AND id = @id AND state = ANY(@states::text[])
RETURNING *;

-- name: ActionClose :one
-- Resolve or cancel by a person, from the states the act allows (never while a
-- worker holds it, never twice).
UPDATE actions
SET state = @state, reason = @reason,
    external_ref = CASE WHEN @external_ref::text <> '' THEN @external_ref ELSE external_ref END,
    next_attempt_at = now(), updated_at = now()
WHERE client = @client AND id = @id
  AND state = ANY(@states::text[])
RETURNING *;

-- name: ActionAssign :one
UPDATE actions SET owner = @owner, updated_at = now()
WHERE client = @client AND id = @id
RETURNING *;

-- name: ActionList :many
-- Keyset pagination in the order @sort names: '-created' (newest first, the
-- default), 'created' (oldest first), 'state_since' (longest waiting in its state
-- first) or '-state_since'; the cursor is the last row's id (and state_since, for
-- the last two). Empty filters match everything. It is the one place a filter
-- becomes SQL: the pages, the API, CSV export and "all that match" bulk acts all
-- read it. q matches a business key or its beginning (in any case, LIKE's
-- wildcards taken literally), an operation key, an external ref, an owner, a
-- value of the params (a customer's email, an amount: param_values, in any
-- case, probed once in actions_param_values_idx, at most 5,000 of them), an
-- event id, or words of the reason of an action that waits for a person (those
-- are few: their reasons are read, no index serves a part of a reason); the rest
-- is an index probe (clients and sources are the configured ones,
-- which lead the keys of operation keys and event ids). reason is a part of the
-- reason; since/until bound the creation time; http_status matches an attempt's
-- reply (a part of the reason is looked for among each state's first
-- @reason_walk rows of the walk, see below); snoozed keeps or leaves out the actions a person snoozed, parked those
-- an open breaker parks. all_clients, else scope_clients, is what the reader may see (see
-- ledger's scope). Each state is walked on its own down actions_state_idx (state, id DESC)
-- or actions_owner_idx with an owner, for at most state_rows rows (max_rows in all), so a page costs
-- the same with a thousand actions or a million; sorted by waiting time, the
-- states that wait for a person walk actions_waiting_idx the same way, and the
-- workers' states (pending, processing, retrying: few and brief, and an index of
-- them would cost every worker's write) are sorted whole. It is planned per call
-- (db.PlannedPerCall): Postgres then sees @sort and the filters, keeps only the
-- order and the keyset condition they choose (a sort key that is a constant is no
-- sort key) and probes the indexes of a search. A range on one state value keeps
-- the walk on the index's order; with state = s.state Postgres forgets it.
-- @client holds every table it reads to that client: on Citus a list across
-- clients is this query run for each client (db.ActionListByClient), each then
-- routed whole to that client's shard, where its walks run as on one Postgres.
-- The actions a value of the params finds (param_hits) are read once, with
-- their states, and each state's walk takes its own: read in each walk, an
-- amount carried by 2,000 actions cost 2,000 reads of the table a state.
WITH param_hits AS MATERIALIZED (
    SELECT x.id, x.state FROM actions x
    WHERE @q::text <> '' AND (@client = '' OR x.client = @client)
      AND x.param_values @> jsonb_build_array(lower(@q))
    LIMIT 5000
)
SELECT * FROM actions a
WHERE (@client::text = '' OR a.client = @client)
  AND (a.client, a.id) IN (
    SELECT p.client, p.id
    FROM unnest(CASE WHEN cardinality(@states::text[]) = 0
                     THEN ARRAY['pending', 'processing', 'retrying', 'held', 'uncertain',
                                'failed', 'confirmed', 'resolved', 'cancelled']
                     ELSE @states::text[] END) AS s(state)
    CROSS JOIN LATERAL (
      SELECT w.client, w.id FROM (
        SELECT b.client, b.id, b.reason FROM actions b
        WHERE b.state >= s.state AND b.state <= s.state
          AND (@source::text = '' OR b.source = @source)
          AND (@name::text = '' OR b.name = @name)
          AND (@owner::text = '' OR b.owner = @owner)
          AND (@destination::text = '' OR b.destination = @destination)
          AND (@client::text = '' OR b.client = @client)
          AND (@all_clients::boolean OR b.client = ANY(@scope_clients::text[]))
          AND (@q::text = '' OR lower(b.business_key)
                   LIKE replace(replace(replace(lower(@q), '\', '\\'), '%', '\%'), '_', '\_') || '%'
               OR (b.client = ANY(@clients::text[]) AND b.operation_key = @q)
               OR (b.external_ref = @q AND b.external_ref <> '') OR b.owner = @q
               OR b.id = ANY(ARRAY(SELECT h.id FROM param_hits h WHERE h.state = s.state))
               OR (b.state IN ('held', 'uncertain', 'failed')
                   AND b.reason ILIKE '%' || replace(replace(replace(@q, '\', '\\'), '%', '\%'), '_', '\_') || '%')
               OR b.id = ANY(ARRAY(SELECT ae.action_id FROM events e
                                   JOIN action_events ae ON ae.client = e.client AND ae.event_id = e.id
                                   WHERE (@client = '' OR e.client = @client)
                                     AND e.client = ANY(@clients::text[]) AND e.source = ANY(@sources::text[])
                                     AND e.source_event_id = @q)))
          AND (sqlc.narg(since)::timestamptz IS NULL OR b.created_at >= sqlc.narg(since))
          AND (sqlc.narg(until)::timestamptz IS NULL OR b.created_at < sqlc.narg(until))
          AND (@http_status::integer = 0
               OR EXISTS (SELECT 1 FROM attempts t WHERE (@client = '' OR t.client = @client)
                          AND t.client = b.client AND t.action_id = b.id AND t.part_day = b.rows_day
                          AND t.http_status = @http_status))
          -- snoozed: '' every action, 'awake' those not snoozed at @snooze_now
          -- (the queues' default view), 'asleep' those snoozed then.
          AND (@snoozed::text = ''
               OR (@snoozed = 'asleep') = EXISTS (SELECT 1 FROM snoozes z WHERE (@client = '' OR z.client = @client)
                          AND z.client = b.client AND z.action_id = b.id AND z.until > @snooze_now::timestamptz))
          -- parked: '' every action, 'out' those no open breaker parks (the
          -- queues' default view: they are one cause above the table), 'only'
          -- the parked ones (a person's act may close a parked action: it is
          -- then no longer parked, though parked_at is kept until the release).
          -- imported_only: only the actions imported from an earlier system.
          AND (NOT @imported_only::boolean OR b.imported_from <> '')
          AND (@parked::text = ''
               OR (@parked = 'only') = (b.parked_at IS NOT NULL AND b.state IN ('pending', 'retrying', 'uncertain')))
          -- Sorted by waiting time, only open actions. When the caller lists only
          -- states that wait for a person (person_states), the condition is
          -- actions_waiting_idx's own, and Postgres walks it.
          AND (@sort::text NOT IN ('state_since', '-state_since')
               OR b.state = ANY(CASE WHEN @person_states::boolean THEN ARRAY['held', 'uncertain', 'failed']
                                     ELSE ARRAY['pending', 'processing', 'retrying', 'held', 'uncertain', 'failed'] END))
          AND CASE @sort::text
                  WHEN 'created' THEN b.id > coalesce(sqlc.narg(cursor_id)::bigint, 0)
                  WHEN 'state_since' THEN (b.state_since, b.id) >
                      (coalesce(sqlc.narg(cursor_at)::timestamptz, '-infinity'), coalesce(sqlc.narg(cursor_id)::bigint, 0))
                  WHEN '-state_since' THEN (b.state_since, b.id) <
                      (coalesce(sqlc.narg(cursor_at)::timestamptz, 'infinity'), coalesce(sqlc.narg(cursor_id)::bigint, 9223372036854775807))
                  ELSE b.id < coalesce(sqlc.narg(cursor_id)::bigint, 9223372036854775807) END
        -- A walk backwards down an index goes down every column of it backwards.
        ORDER BY CASE WHEN @sort IN ('created', '-state_since') THEN b.state END DESC,
                 CASE WHEN @sort NOT IN ('created', '-state_since') THEN b.state END,
                 CASE WHEN @sort = 'state_since' THEN b.state_since END,
                 CASE WHEN @sort = '-state_since' THEN b.state_since END DESC,
                 CASE WHEN @sort = 'created' OR @sort = 'state_since' THEN b.id END,
                 CASE WHEN @sort NOT IN ('created', 'state_since') THEN b.id END DESC
        -- A part of the reason is looked for among the first @reason_walk rows
        -- of the walk: no index serves it, and a state without it would be read
        -- whole (16 s at ten million actions).
        LIMIT CASE WHEN @reason::text = '' THEN @state_rows::integer ELSE @reason_walk::integer END) w
      WHERE (@reason::text = '' OR w.reason ILIKE '%' || @reason || '%')
      LIMIT @state_rows) p)
ORDER BY CASE WHEN @sort = 'state_since' THEN a.state_since END,
         CASE WHEN @sort = '-state_since' THEN a.state_since END DESC,
         CASE WHEN @sort = 'created' OR @sort = 'state_since' THEN a.id END,
         CASE WHEN @sort NOT IN ('created', 'state_since') THEN a.id END DESC
LIMIT @max_rows;

-- name: ActionCountByState :many
-- Counts by state, without counting a million rows: each state is counted along
-- actions_state_idx up to 1,000 actions; past that the planner's statistics give
-- the figure (refreshed by autovacuum's ANALYZE), never less than 1,001. oldest is
-- the creation time of the state's lowest id. States without actions are left out.
-- (The range on one value keeps Postgres on the index; see ActionList.)
SELECT s.state::text AS state,
       (CASE WHEN c.n > 1000 THEN greatest(c.n, coalesce(est.n, 0)) ELSE c.n END)::bigint AS n,
       o.created_at::timestamptz AS oldest
FROM unnest(ARRAY['pending', 'processing', 'retrying', 'held', 'uncertain',
                  'failed', 'confirmed', 'resolved', 'cancelled']) AS s(state)
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM actions a WHERE a.state >= s.state AND a.state <= s.state LIMIT 1001) capped) c
CROSS JOIN LATERAL (
    SELECT a.created_at FROM actions a
    WHERE a.state >= s.state AND a.state <= s.state
    ORDER BY a.state DESC, a.id
    LIMIT 1) o
LEFT JOIN LATERAL (
    SELECT (t.reltuples * st.most_common_freqs[array_position(st.most_common_vals::text::text[], s.state)])::bigint AS n
    FROM pg_catalog.pg_class t
    JOIN pg_catalog.pg_stats st ON st.schemaname = current_schema() AND st.tablename = t.relname AND st.attname = 'state'
    WHERE t.oid = 'actions'::regclass) est ON true
ORDER BY s.state;

-- name: ActionCountByStateOfClient :many
-- ActionCountByState for one client, on Citus: routed whole to the client's
-- shard, each state counted along actions_state_idx up to 1,001 of the client's
-- actions, and the creation time of its lowest id. Past 1,000 the caller asks the
-- shard's planner for its estimate (db.EstimateActions): the coordinator's own
-- statistics of the table are empty. States without actions are left out.
SELECT s.state::text AS state, c.n::bigint AS n, o.created_at::timestamptz AS oldest
FROM unnest(ARRAY['pending', 'processing', 'retrying', 'held', 'uncertain',
                  'failed', 'confirmed', 'resolved', 'cancelled']) AS s(state)
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM (
        SELECT 1 FROM actions a WHERE a.client = @client AND a.state >= s.state AND a.state <= s.state
        LIMIT 1001) capped) c
CROSS JOIN LATERAL (
    SELECT a.created_at FROM actions a
    WHERE a.client = @client AND a.state >= s.state AND a.state <= s.state
    ORDER BY a.state DESC, a.id
    LIMIT 1) o
ORDER BY s.state;

-- name: ActionClientsWithRows :many
-- Every client that has actions: on Citus, beside the config's clients, the
-- clients a dashboard read across clients goes round (a client dropped from the
-- config keeps its actions). Each shard groups its own rows.
SELECT client FROM actions GROUP BY client ORDER BY client;

-- name: ActionClientsStored :many
-- ActionClientsWithRows on one Postgres: the distinct clients read along the
-- primary key, one probe a client (a loose index scan), however many actions.
WITH RECURSIVE c AS (
    (SELECT a.client FROM actions a ORDER BY a.client LIMIT 1)
    UNION ALL
    SELECT (SELECT a.client FROM actions a WHERE a.client > c.client ORDER BY a.client LIMIT 1)
    FROM c WHERE c.client IS NOT NULL
)
SELECT c.client::text AS client FROM c WHERE c.client IS NOT NULL;

-- name: ActionCountInScope :one
-- ActionCountByState's figures for one state and the clients of a person who sees
-- some: up to 1,001 actions, and the creation time of the lowest id. Planned per
-- call (db.PlannedPerCall) with the state and the clients known, Postgres walks
-- the primary key (client, id) for a client with few actions and
-- actions_state_idx for a state a large client has many of. oldest is the epoch
-- when n is 0.
SELECT (SELECT count(*) FROM (
            SELECT 1 FROM actions a WHERE a.state = @state AND a.client = ANY(@scope_clients::text[])
            LIMIT 1001) capped)::bigint AS n,
       coalesce((SELECT a.created_at FROM actions a WHERE a.state = @state AND a.client = ANY(@scope_clients::text[])
                 ORDER BY a.id LIMIT 1), 'epoch')::timestamptz AS oldest;

-- name: ActionCancelSuccessors :many
-- The predecessor will never be performed: successors waiting for it will not be either.
UPDATE actions
SET state = 'cancelled', reason = @reason, updated_at = now(), next_attempt_at = now()
WHERE client = @client AND after_id = @after_id AND state IN ('pending', 'uncertain')
  AND next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz
RETURNING id;

-- name: ActionWaitingSuccessors :many
-- The successors that wait for this action: what cancelling it cancels with it
-- (ActionCancelSuccessors).
SELECT * FROM actions
WHERE client = @client AND after_id = @after_id AND state IN ('pending', 'uncertain')
  AND next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz
ORDER BY id;

-- name: ActionApplyCorrection :one
-- An approved correction: the corrected params (params_sha256 stays the hash of
-- what the events asked for, so their repeats are no conflict), the new attempt
-- identity when one is needed, and the state the decision table gives, with a
-- fresh budget.
UPDATE actions
SET params = @params, attempt_key = CASE WHEN @attempt_key::text <> '' THEN @attempt_key ELSE attempt_key END,
    state = @next_state::text, reason = @reason, next_attempt_at = now(),
    max_attempts = attempts + @budget_attempts,
    give_up_at = now() + make_interval(secs => @within_seconds::double precision),
    updated_at = now()
WHERE client = @client AND id = @id AND state = 'failed'
RETURNING *;

-- name: SnoozeSet :exec
-- Snoozes an action until @until (a later snooze replaces an earlier one).
INSERT INTO snoozes (client, action_id, until, snoozed_by, snoozed_at)
VALUES (@client, @action_id, @until, @snoozed_by, @now)
ON CONFLICT (client, action_id) DO UPDATE
SET until = EXCLUDED.until, snoozed_by = EXCLUDED.snoozed_by, snoozed_at = EXCLUDED.snoozed_at;

-- name: SnoozeClear :execrows
DELETE FROM snoozes WHERE client = @client AND action_id = @action_id;

-- name: SnoozeList :many
-- The snoozes of a client's actions ids that have not run out by @now.
SELECT action_id, until, snoozed_by FROM snoozes
WHERE client = @client AND action_id = ANY(@action_ids::bigint[]) AND until > @now;

-- name: ActionCountParked :one
-- The actions a destination's open breaker parks, of the clients the reader
-- sees: read from actions_parked_idx, for the destinations page.
SELECT count(*)::bigint FROM actions
WHERE destination = @destination AND parked_at IS NOT NULL AND state IN ('pending', 'retrying', 'uncertain')
  AND (@all_clients::boolean OR client = ANY(@scope_clients::text[]));

-- name: ActionWaitingByClient :many
-- How many actions of each client wait for a destination (pending, retrying or
-- uncertain), most first: what an outage's alert says (actions_cause_idx).
SELECT client, count(*)::bigint AS waiting FROM actions
WHERE destination = @destination AND state IN ('pending', 'retrying', 'uncertain')
GROUP BY client ORDER BY waiting DESC, client;
