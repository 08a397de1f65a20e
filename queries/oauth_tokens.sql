-- name: OAuthTokenEnsure :exec
-- Makes the row a refresher locks, once per destination.
INSERT INTO oauth_tokens (destination) VALUES (@destination) ON CONFLICT (destination) DO NOTHING;

-- name: OAuthTokenLock :one
-- The refresh lock: other refreshers of this destination wait here, then read what
-- the one before them stored.
SELECT * FROM oauth_tokens WHERE destination = @destination FOR UPDATE;

-- name: OAuthTokenGet :one
SELECT * FROM oauth_tokens WHERE destination = @destination;

-- name: OAuthTokenSave :exec
-- Stores a grant: refreshed counts a refresh (not a first connection).
INSERT INTO oauth_tokens (destination, sealed, expires_at, obtained_at, refreshes, updated_at)
VALUES (@destination, @sealed, @expires_at, @obtained_at, CASE WHEN @refreshed::boolean THEN 1 ELSE 0 END, now())
ON CONFLICT (destination) DO UPDATE
SET sealed = EXCLUDED.sealed, expires_at = EXCLUDED.expires_at, obtained_at = EXCLUDED.obtained_at,
    refreshes = oauth_tokens.refreshes + EXCLUDED.refreshes, updated_at = EXCLUDED.updated_at;

-- name: OAuthTokenReseal :execrows
-- Re-seals a grant with the current key (key rotation), only if it is unchanged.
UPDATE oauth_tokens SET sealed = @resealed WHERE destination = @destination AND sealed = @sealed;

-- name: OAuthTokenList :many
SELECT * FROM oauth_tokens ORDER BY destination;

-- name: DestinationAwaitConnection :exec
-- An authorization_code destination without a grant is disconnected until its
-- first Reconnect; a reason already given (a refused refresh) is kept.
INSERT INTO destinations (name, status, reason, changed_at) VALUES (@name, 'disconnected', @reason, now())
ON CONFLICT (name) DO UPDATE SET status = 'disconnected', reason = EXCLUDED.reason, changed_at = EXCLUDED.changed_at
WHERE destinations.status = 'connected';
