-- name: TokenInsert :one
INSERT INTO api_tokens (name, role, clients, token_sha256, expires_at)
VALUES (@name, @role, @clients, @token_sha256, @expires_at)
RETURNING *;

-- name: TokenGetByHash :one
-- A revoked or expired token is not found.
SELECT * FROM api_tokens WHERE token_sha256 = @token_sha256 AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > now());

-- name: TokenTouch :exec
-- Marks a token used; at most once a minute, so reads do not each write.
UPDATE api_tokens SET last_used_at = now()
WHERE id = @id AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute');

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
