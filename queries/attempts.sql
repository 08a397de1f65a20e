-- name: AttemptStart :one
INSERT INTO attempts (client, action_id, kind, operation_key, worker)
VALUES (@client, @action_id, @kind, @operation_key, @worker)
RETURNING id;

-- name: AttemptFinishBatch :exec
-- Finishes a group of attempts in one statement; an http_status of 0 is none.
UPDATE attempts t
SET status = 'finished', observed = r.observed, http_status = nullif(r.http_status, 0),
    error = r.error, evidence = r.evidence, finished_at = now()
FROM (SELECT unnest(@clients::text[]) AS client, unnest(@ids::bigint[]) AS id,
             unnest(@observed::text[]) AS observed, unnest(@http_statuses::integer[]) AS http_status,
             unnest(@errors::text[]) AS error, unnest(@evidence::text[]) AS evidence) r
WHERE t.client = r.client AND t.id = r.id;

-- name: AttemptAbandonStarted :exec
-- Recovery: the worker that started these is gone; the action says what happens next.
UPDATE attempts
SET status = 'abandoned', observed = 'lease expired', finished_at = now()
WHERE client = @client AND action_id = @action_id AND status = 'started';

-- name: AttemptList :many
SELECT * FROM attempts WHERE client = @client AND action_id = @action_id ORDER BY id;
