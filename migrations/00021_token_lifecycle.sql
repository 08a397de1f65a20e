-- +goose Up
-- API tokens end: an expiry chosen at creation, revocation by an admin, and the
-- last time each was used; who created and revoked each is in token_audit.
ALTER TABLE api_tokens
    ADD COLUMN expires_at   timestamptz,
    ADD COLUMN last_used_at timestamptz;

CREATE TABLE token_audit (
    id       bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    token_id bigint      NOT NULL REFERENCES api_tokens (id),
    actor    text        NOT NULL,
    act      text        NOT NULL CHECK (act IN ('create', 'revoke')),
    at       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX token_audit_token_idx ON token_audit (token_id);

-- +goose Down
DROP TABLE token_audit;
ALTER TABLE api_tokens DROP COLUMN last_used_at, DROP COLUMN expires_at;
