-- name: CorrectionInsert :one
-- A proposed correction; the unique index on open corrections refuses a second one.
INSERT INTO corrections (client, action_id, original, params, provider_reason, note, proposed_by)
VALUES (@client, @action_id, @original, @params, @provider_reason, @note, @proposed_by)
ON CONFLICT (client, action_id) WHERE state = 'proposed' DO NOTHING
RETURNING *;

-- name: CorrectionOpen :one
SELECT * FROM corrections WHERE client = @client AND action_id = @action_id AND state = 'proposed'
FOR UPDATE;

-- name: CorrectionOpenList :many
-- The clients of the actions lead the key (and on Citus name the shards to read).
SELECT * FROM corrections
WHERE client = ANY(@clients::text[]) AND action_id = ANY(@action_ids::bigint[]) AND state = 'proposed';

-- name: CorrectionList :many
SELECT * FROM corrections WHERE client = @client AND action_id = @action_id ORDER BY id;

-- name: CorrectionDecide :one
UPDATE corrections
SET state = @state, decided_by = @decided_by, decided_at = now(), decision_note = @decision_note,
    attempt_key = @attempt_key
WHERE client = @client AND id = @id AND state = 'proposed'
RETURNING *;

-- name: CorrectionSupersede :execrows
-- Another act took the action out of failed: the waiting correction is refused
-- in its name, so it can never be approved onto a later state.
UPDATE corrections
SET state = 'refused', decided_by = @decided_by, decided_at = now(), decision_note = @decision_note
WHERE client = @client AND action_id = @action_id AND state = 'proposed';
