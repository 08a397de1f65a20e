-- +goose Up
-- The key the destination sees for an action: its attempt key, the new attempt
-- identity an approved correction gave it, when it has one, else its operation
-- key. The statements that write a started attempt in SQL call it; the Go side
-- is ledger.SentKeyOf, and internal/store's agreement tests hold the two to the
-- same answer. A SQL function of one expression, immutable, is inlined where it
-- is called.
-- +goose StatementBegin
CREATE FUNCTION sent_key(attempt_key text, operation_key text) RETURNS text
LANGUAGE sql IMMUTABLE PARALLEL SAFE
AS $$ SELECT coalesce(nullif(attempt_key, ''), operation_key) $$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION sent_key(text, text);
