-- +goose Up
-- Scopes: a user or an API token is an admin (every client), or an operator or a
-- read-only viewer of the clients listed in clients. People who sign in through an
-- identity provider are known by its issuer and subject; their password_hash is ''
-- (no local password).
ALTER TABLE users DROP CONSTRAINT users_role_check;
ALTER TABLE users
    ADD CONSTRAINT users_role_check CHECK (role IN ('admin', 'operator', 'viewer')),
    ADD COLUMN clients     text[] NOT NULL DEFAULT '{}',
    ADD COLUMN oidc_issuer  text,
    ADD COLUMN oidc_subject text,
    ADD COLUMN signed_in_at timestamptz;
CREATE UNIQUE INDEX users_oidc_idx ON users (oidc_issuer, oidc_subject) WHERE oidc_subject IS NOT NULL;

ALTER TABLE api_tokens DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens
    ADD CONSTRAINT api_tokens_role_check CHECK (role IN ('admin', 'operator', 'viewer')),
    ADD COLUMN clients text[] NOT NULL DEFAULT '{}';

-- +goose Down
DROP INDEX users_oidc_idx;
ALTER TABLE api_tokens DROP COLUMN clients, DROP CONSTRAINT api_tokens_role_check;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_role_check CHECK (role IN ('admin', 'operator'));
ALTER TABLE users DROP COLUMN signed_in_at, DROP COLUMN oidc_subject, DROP COLUMN oidc_issuer,
    DROP COLUMN clients, DROP CONSTRAINT users_role_check;
ALTER TABLE users ADD CONSTRAINT users_role_check CHECK (role IN ('admin', 'operator'));
