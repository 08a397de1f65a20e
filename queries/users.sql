-- name: UserInsert :one
INSERT INTO users (email, role, clients, password_hash) VALUES (@email, @role, @clients, @password_hash)
RETURNING *;

-- name: UserGetByEmail :one
SELECT * FROM users WHERE lower(email) = lower(@email);

-- name: UserGet :one
SELECT * FROM users WHERE id = @id;

-- name: UserList :many
SELECT * FROM users ORDER BY email;

-- name: UserSetRole :exec
UPDATE users SET role = @role, clients = @clients WHERE id = @id;

-- name: UserSetDisabled :exec
UPDATE users SET disabled = @disabled WHERE id = @id;

-- name: UserListEnabled :many
-- The people an action can be assigned to.
SELECT * FROM users WHERE NOT disabled ORDER BY email;

-- name: UserLockAdmins :many
-- Locks the enabled admins, in one order: a change that would leave none waits for
-- any other change to them, then counts them as that change left them.
SELECT id FROM users WHERE role = 'admin' AND NOT disabled ORDER BY id FOR UPDATE;

-- name: UserEnsure :one
-- Creates the user, or gives the existing one (any case of its email) this password
-- and enables it, keeping its role: one statement, so two at once cannot collide.
INSERT INTO users (email, role, clients, password_hash) VALUES (@email, @role, @clients, @password_hash)
ON CONFLICT ((lower(email))) DO UPDATE SET password_hash = excluded.password_hash, disabled = false
RETURNING *;

-- name: UserSignIn :one
-- Creates the person signing in through the identity provider, or brings their
-- email, role and clients up to the provider's word: keyed by (issuer, subject), in
-- one statement, so two sign-ins at once cannot make two users. A disabled user is
-- updated too (their access follows the provider) but is not signed in.
INSERT INTO users (email, role, clients, password_hash, oidc_issuer, oidc_subject, signed_in_at)
VALUES (@email, @role, @clients::text[], '', @oidc_issuer::text, @oidc_subject::text, now())
ON CONFLICT (oidc_issuer, oidc_subject) WHERE oidc_subject IS NOT NULL DO UPDATE
SET email = excluded.email, role = excluded.role, clients = excluded.clients,
    signed_in_at = CASE WHEN users.disabled THEN users.signed_in_at ELSE excluded.signed_in_at END
RETURNING *;

-- name: UserRevokeAccess :exec
-- Takes every client away from the identity provider's user that no rule gives
-- access any more; role is the least one.
UPDATE users SET role = @role, clients = '{}'
WHERE oidc_issuer = @oidc_issuer::text AND oidc_subject = @oidc_subject::text;
