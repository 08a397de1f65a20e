-- name: TokenInsert :one
INSERT INTO api_tokens (name, role, token_sha256) VALUES (@name, @role, @token_sha256)
RETURNING id;

-- name: TokenGetByHash :one
SELECT * FROM api_tokens WHERE token_sha256 = @token_sha256 AND revoked_at IS NULL;
