-- name: AuditInsert :exec
INSERT INTO audit (client, action_id, actor, act, note, detail)
VALUES (@client, @action_id, @actor, @act, @note, @detail);

-- name: AuditList :many
SELECT * FROM audit WHERE client = @client AND action_id = @action_id ORDER BY id;

-- name: AuditLatest :one
SELECT * FROM audit WHERE client = @client AND action_id = @action_id AND act = @act
ORDER BY id DESC LIMIT 1;
