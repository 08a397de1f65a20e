-- name: AttemptStart :one
INSERT INTO attempts (client, action_id, kind, operation_key, worker)
VALUES (@client, @action_id, @kind, @operation_key, @worker)
RETURNING id;

-- name: AttemptStartEach :batchone
-- AttemptStart for each of the calls a claim started on Citus (ActionClaimSharded,
-- ActionStartCallsSharded): each insert on the client's shard, sent together.
INSERT INTO attempts (client, action_id, kind, operation_key, worker)
VALUES (@client, @action_id, @kind, @operation_key, @worker)
RETURNING id;

-- name: AttemptAbandonStarted :exec
-- Recovery: the worker that started these is gone; the action says what happens next.
UPDATE attempts
SET status = 'abandoned', observed = 'lease expired', finished_at = now()
WHERE client = @client AND action_id = @action_id AND status = 'started';

-- name: AttemptList :many
SELECT * FROM attempts WHERE client = @client AND action_id = @action_id ORDER BY id;
