-- name: AuditInsert :exec
INSERT INTO audit (client, action_id, actor, act, note, detail)
VALUES (@client, @action_id, @actor, @act, @note, @detail);

-- name: AuditList :many
SELECT * FROM audit WHERE client = @client AND action_id = @action_id ORDER BY id;

-- name: AuditLatest :one
SELECT * FROM audit WHERE client = @client AND action_id = @action_id AND act = @act
ORDER BY id DESC LIMIT 1;

-- name: AuditLatestNotes :many
-- The newest note of each of a client's actions ids, for the queues' rows: one
-- read of the client's shard along audit_action_idx.
SELECT DISTINCT ON (action_id) action_id, actor, note, at
FROM audit
WHERE client = @client AND action_id = ANY(@action_ids::bigint[]) AND act = 'note'
ORDER BY action_id, id DESC;

-- name: AuditLast :one
-- The newest audit entry of an action, whatever its act: what an undo undoes.
SELECT * FROM audit WHERE client = @client AND action_id = @action_id
ORDER BY id DESC LIMIT 1;
