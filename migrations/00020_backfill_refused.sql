-- +goose Up
-- The deliveries a GitHub pass does not ask for again: their last attempt was
-- answered by oncehook with a 4xx (a signature it refused, a body over the limit).
ALTER TABLE backfill_state
    ADD COLUMN refused integer NOT NULL DEFAULT 0,
    ADD COLUMN refused_ids text[] NOT NULL DEFAULT '{}';

-- +goose Down
ALTER TABLE backfill_state DROP COLUMN refused, DROP COLUMN refused_ids;
