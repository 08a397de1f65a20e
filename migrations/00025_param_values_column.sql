-- +goose Up
-- The values the search box finds an action by (action_param_values, 00017) are
-- kept in a column of their own, computed once when the params are written,
-- instead of by an index expression. No update of an action by a worker can be a
-- HOT update (each changes the state, which indexes read), so every claim and
-- every outcome wrote a new entry into every index, and the expression index ran
-- the function again for each: a SQL function that starts an executor per call,
-- about 7% of Postgres' CPU end to end. A router's insert gives the column;
-- another insert, or a change of the params, has it computed by a trigger.
ALTER TABLE actions ADD COLUMN param_values jsonb;
UPDATE actions SET param_values = action_param_values(params);
ALTER TABLE actions ALTER COLUMN param_values SET NOT NULL;

-- +goose StatementBegin
CREATE FUNCTION actions_param_values() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.param_values := action_param_values(NEW.params);
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER actions_param_values_insert BEFORE INSERT ON actions
FOR EACH ROW WHEN (NEW.param_values IS NULL)
EXECUTE FUNCTION actions_param_values();

CREATE TRIGGER actions_param_values_update BEFORE UPDATE OF params, param_values ON actions
FOR EACH ROW WHEN (OLD.params IS DISTINCT FROM NEW.params OR OLD.param_values IS DISTINCT FROM NEW.param_values)
EXECUTE FUNCTION actions_param_values();

DROP INDEX actions_param_values_idx;
CREATE INDEX actions_param_values_idx ON actions USING gin (param_values jsonb_path_ops);

-- +goose Down
DROP INDEX actions_param_values_idx;
CREATE INDEX actions_param_values_idx ON actions USING gin (action_param_values(params) jsonb_path_ops);
DROP TRIGGER actions_param_values_update ON actions;
DROP TRIGGER actions_param_values_insert ON actions;
DROP FUNCTION actions_param_values();
ALTER TABLE actions DROP COLUMN param_values;
