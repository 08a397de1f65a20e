-- +goose Up
-- Each claim of an action gets the next token, and a worker records an outcome or
-- renews a lease only under the token of its own claim. A worker's name alone is not
-- enough: a statement it retries after losing the reply could otherwise land on a
-- newer claim of the same action by the same worker.
ALTER TABLE actions ADD COLUMN lease_token bigint NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE actions DROP COLUMN lease_token;
