-- +goose Up
-- The overview and the queues group the actions that wait for a person by what
-- holds them: state, destination and the cause their reason starts with. The
-- causes are a few dozen known beginnings (none longer than 80 bytes), so the
-- first 80 bytes of the reason decide the group; reason_start keeps them for the
-- actions that wait for a person and is null for every other action, and
-- actions_cause_idx holds the groups, so they are counted from the index alone.
-- A trigger keeps reason_start, firing only for the rows that enter, stay in or
-- leave those states (the workers' writes of other states skip it). It is a
-- trigger rather than a generated column, which would rewrite the table.
ALTER TABLE actions ADD COLUMN reason_start text;

-- +goose StatementBegin
CREATE FUNCTION actions_reason_start() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.reason_start := CASE WHEN NEW.state IN ('held', 'uncertain', 'failed') THEN left(NEW.reason, 80) END;
    RETURN NEW;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER actions_reason_start_insert BEFORE INSERT ON actions
FOR EACH ROW WHEN (NEW.state IN ('held', 'uncertain', 'failed'))
EXECUTE FUNCTION actions_reason_start();
CREATE TRIGGER actions_reason_start_update BEFORE UPDATE OF state, reason ON actions
FOR EACH ROW WHEN (NEW.state IN ('held', 'uncertain', 'failed') OR OLD.reason_start IS NOT NULL)
EXECUTE FUNCTION actions_reason_start();

UPDATE actions SET reason_start = left(reason, 80) WHERE state IN ('held', 'uncertain', 'failed');
CREATE INDEX actions_cause_idx ON actions (state, destination, reason_start) INCLUDE (client, state_since)
    WHERE state IN ('held', 'uncertain', 'failed');

-- Words of a reason, in the search box and the reason filter of the queues that
-- wait for a person, through trigrams (pg_trgm, which PostgreSQL ships in its
-- contrib modules). Where pg_trgm cannot be created here the search still works,
-- reading those actions' reasons.
-- +goose StatementBegin
DO $$
BEGIN
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE INDEX actions_reason_words_idx ON actions USING gin (reason gin_trgm_ops)
        WHERE state IN ('held', 'uncertain', 'failed');
EXCEPTION WHEN undefined_file OR insufficient_privilege OR feature_not_supported THEN
    RAISE NOTICE 'pg_trgm is not available (%): searching words of a reason reads the reasons', SQLERRM;
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP INDEX IF EXISTS actions_reason_words_idx;
DROP INDEX actions_cause_idx;
DROP TRIGGER actions_reason_start_update ON actions;
DROP TRIGGER actions_reason_start_insert ON actions;
DROP FUNCTION actions_reason_start();
ALTER TABLE actions DROP COLUMN reason_start;
