-- name: UserInsert :one
INSERT INTO users (email, role, password_hash) VALUES (@email, @role, @password_hash)
RETURNING *;

-- name: UserGetByEmail :one
SELECT * FROM users WHERE lower(email) = lower(@email);

-- name: UserGet :one
SELECT * FROM users WHERE id = @id;

-- name: UserList :many
SELECT * FROM users ORDER BY email;

-- name: UserSetRole :exec
UPDATE users SET role = @role WHERE id = @id;

-- name: UserSetDisabled :exec
UPDATE users SET disabled = @disabled WHERE id = @id;
