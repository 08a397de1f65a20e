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

-- name: UserListEnabled :many
-- The people an action can be assigned to.
SELECT * FROM users WHERE NOT disabled ORDER BY email;

-- name: UserCountAdmins :one
-- Enabled admins: the last one cannot be demoted or disabled.
SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled;
