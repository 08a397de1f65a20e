-- +goose Up
-- An action whose destination's breaker is open is parked: it stays in its state,
-- its next attempt moves past the breaker's next probe (so the claims of other
-- destinations never read it again while it waits), and parked_at keeps when it
-- became due, which orders the release and gives its elapsed-time budget back.
-- A nullable column without a default adds no rewrite of the table; the index
-- holds only the parked actions, none while every breaker is closed.
ALTER TABLE actions ADD COLUMN parked_at timestamptz;
CREATE INDEX actions_parked_idx ON actions (destination, id) WHERE parked_at IS NOT NULL;

-- +goose Down
DROP INDEX actions_parked_idx;
ALTER TABLE actions DROP COLUMN parked_at;
