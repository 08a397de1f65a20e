-- name: TokenInsert :one
INSERT INTO api_tokens (name, role, clients, token_sha256, expires_at)
VALUES (@name, @role, @clients, @token_sha256, @expires_at)
RETURNING *;

-- name: TokenGetByHash :one
-- A revoked or expired token is not found. touch_due: its use is marked at most
-- once a minute (TokenTouch), so reads do not each write; on Citus, where
-- api_tokens is a reference table on every node, a write is a commit on each.
SELECT sqlc.embed(api_tokens),
       (api_tokens.last_used_at IS NULL OR api_tokens.last_used_at < now() - interval '1 minute')::boolean AS touch_due
FROM api_tokens WHERE token_sha256 = @token_sha256 AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > now());

-- name: TokenTouch :exec
-- Marks a token used, when TokenGetByHash says it is due.
UPDATE api_tokens SET last_used_at = now() WHERE id = @id;

-- name: TokenList :many
SELECT * FROM api_tokens ORDER BY id;

-- name: TokenRevoke :one
UPDATE api_tokens SET revoked_at = now() WHERE id = @id AND revoked_at IS NULL
RETURNING *;

-- name: TokenGet :one
SELECT * FROM api_tokens WHERE id = @id;

-- name: TokenAuditInsert :exec
INSERT INTO token_audit (token_id, actor, act) VALUES (@token_id, @actor, @act);

-- name: TokenAuditList :many
SELECT a.*, t.name AS token_name FROM token_audit a JOIN api_tokens t ON t.id = a.token_id
ORDER BY a.id DESC LIMIT @max_lines;
