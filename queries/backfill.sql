-- name: BackfillEnsure :exec
INSERT INTO backfill_state (client, source) VALUES (@client, @source) ON CONFLICT DO NOTHING;

-- name: BackfillClaim :one
-- Takes the lease of a source's pass when it is due (or forced) and no other process
-- holds a live lease. The database's clock decides, so processes agree.
UPDATE backfill_state
SET lease_until = now() + make_interval(secs => @lease_seconds::float8),
    lease_owner = @owner, started_at = now()
WHERE client = @client AND source = @source
  AND (@force::boolean OR next_at <= now())
  AND (lease_until IS NULL OR lease_until < now())
RETURNING started_at;

-- name: BackfillFinish :exec
-- Records what a pass found and when the next one is due, under the pass's own lease.
UPDATE backfill_state
SET lease_until = NULL, lease_owner = '', finished_at = now(),
    listed = @listed, missing = @missing, stored = @stored, redelivered = @redelivered,
    refused = @refused, refused_ids = @refused_ids::text[],
    error = @error, failures = CASE WHEN @error::text = '' THEN 0 ELSE failures + 1 END,
    passes = passes + 1, next_at = now() + make_interval(secs => @after_seconds::float8)
WHERE client = @client AND source = @source AND lease_owner = @owner;

-- name: BackfillList :many
SELECT * FROM backfill_state ORDER BY source;

-- name: EventKnownIDs :many
-- Which of ids the inbox holds for the source, through its unique key.
SELECT source_event_id FROM events
WHERE client = @client AND source = @source AND source_event_id = ANY(@ids::text[]);
