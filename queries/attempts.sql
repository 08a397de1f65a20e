-- An action's attempts are in the partition of its rows_day (see migration
-- 00039): each statement names that day, read from the action's row or given by
-- the caller from the claim, and touches that one partition.

-- name: AttemptStart :one
-- Starts an attempt of the action, in its rows_day's partition (@part_day, the
-- claim's).
INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
VALUES (@client, @action_id, @kind, @operation_key, @worker, @part_day)
RETURNING id;

-- name: AttemptStartEach :batchone
-- AttemptStart for each of the calls a claim started on Citus (ActionClaimSharded,
-- ActionStartCallsSharded): each insert on the client's shard, sent together,
-- into the claimed action's rows_day (@part_day).
INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
VALUES (@client, @action_id, @kind, @operation_key, @worker, @part_day)
RETURNING id;

-- name: AttemptAbandonStarted :exec
-- Recovery: the worker that started these is gone; the action says what happens next.
UPDATE attempts t
SET status = 'abandoned', observed = 'lease expired', finished_at = now()
WHERE t.client = @client AND t.action_id = @action_id AND t.status = 'started'
  AND t.part_day = (SELECT a.rows_day FROM actions a WHERE a.client = @client AND a.id = @action_id);

-- name: AttemptList :many
SELECT t.* FROM attempts t
WHERE t.client = @client AND t.action_id = @action_id
  AND t.part_day = (SELECT a.rows_day FROM actions a WHERE a.client = @client AND a.id = @action_id)
ORDER BY t.id;
