-- +goose Up
-- state_since is when the action entered its state: the clock of "oldest waiting"
-- and of a row's age, which an Assign, a note or a lease renewal must not reset.
-- A trigger keeps it, so no statement that changes a state can forget it; it runs
-- only when the state column is set to a different value. A worker's claim is a
-- pause, not a new state for the person watching: entering processing, and going
-- back from it to the state it was claimed from, keep the clock.
ALTER TABLE actions ADD COLUMN state_since timestamptz NOT NULL DEFAULT now();
UPDATE actions SET state_since = updated_at;

-- +goose StatementBegin
CREATE FUNCTION actions_state_since() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.state_since := now();
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER actions_state_since BEFORE UPDATE OF state ON actions
FOR EACH ROW
WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state <> 'processing'
      AND NOT (OLD.state = 'processing' AND NEW.state = OLD.claimed_from))
EXECUTE FUNCTION actions_state_since();

-- +goose Down
DROP TRIGGER actions_state_since ON actions;
DROP FUNCTION actions_state_since();
ALTER TABLE actions DROP COLUMN state_since;
