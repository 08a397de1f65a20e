-- +goose Up
-- One row per OAuth2 destination: its grant, sealed with ONCEHOOK_SECRET_KEY
-- (AES-256-GCM; the destination's name is the additional data, so a sealed value
-- cannot be moved to another row). The row is also the lock that lets one process
-- refresh at a time: refreshers take it FOR UPDATE and read it again.
CREATE TABLE oauth_tokens (
    destination  text        PRIMARY KEY,
    sealed       bytea,                      -- NULL until the first connection
    expires_at   timestamptz,                -- NULL: no expiry given (or none yet)
    obtained_at  timestamptz,
    refreshes    bigint      NOT NULL DEFAULT 0,
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE oauth_tokens;
