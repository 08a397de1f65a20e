-- +goose Up
-- An action's attempts and audit entries are partitioned by a day of their own,
-- part_day: the day of the partition the action's rows are written in, kept on
-- the action (actions.rows_day), not the time an attempt started or an entry was
-- made. Every row an action has is in its rows_day's partition, so a statement
-- that records an outcome or reads an action's history names that day and
-- touches one partition; when retention drops a day, the rows an action still
-- needs are carried forward to a current day first (rows_day moves with them,
-- and no time the rows record changes). Nothing references these rows, and they
-- no longer reference actions: an action's pruning no longer cascades into
-- every partition (retention removes the rows of the actions it prunes).
--
-- The rows written before this migration stay where they are, in the partition
-- of the day 1970-01-01 (from MINVALUE), which is the tables as they were: the
-- actions made before it have rows_day 1970-01-01. New actions get the day they
-- are made (UTC). Partitioned tables have no identity column on PostgreSQL 15:
-- the ids come from a sequence that goes on from the identity's.
--
-- On a Citus cluster distributed before this migration, its statements run over
-- one connection per node: Citus creates no function in a transaction that
-- changed a distributed table over several (the tables below, then
-- oncehook_partitions_make). Elsewhere the setting is a placeholder that changes
-- nothing.
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
ALTER TABLE actions ADD COLUMN rows_day date NOT NULL DEFAULT '1970-01-01';
ALTER TABLE actions ALTER COLUMN rows_day SET DEFAULT ((now() AT TIME ZONE 'UTC')::date);

ALTER TABLE attempts DROP CONSTRAINT attempts_client_action_id_fkey;
ALTER TABLE audit DROP CONSTRAINT audit_client_action_id_fkey;

-- On a Citus cluster distributed before this migration, Citus changes no
-- identity of a distributed table (neither drops it nor undistributes the
-- table): the old rows are copied through the coordinator into a local table
-- that is the old day's partition as the statements after this make it (a
-- part_day, its NOT NULL and CHECK constraints, no identity, no key, no
-- index), the distributed table is dropped,
-- and the sequence goes on from its identity. The statements after this find
-- their work done and pass (IF EXISTS, IF NOT EXISTS), and the tables are
-- distributed again with their partitions after the migrations (db.Migrate
-- distributes every table not distributed yet), as on a new cluster.
-- +goose StatementBegin
DO $$
DECLARE
    t    text;
    next bigint;
    col  text;
    def  text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'attempts'::regclass) THEN
        RETURN;
    END IF;
    FOREACH t IN ARRAY ARRAY['attempts', 'audit'] LOOP
        next := nextval(pg_get_serial_sequence(t, 'id'));
        EXECUTE format('CREATE TABLE %I AS SELECT *, %L::date AS part_day FROM %I', t || '_19700101', '1970-01-01', t);
        FOR col IN SELECT a.attname FROM pg_attribute a
                   WHERE a.attrelid = t::regclass AND a.attnum > 0 AND NOT a.attisdropped AND a.attnotnull LOOP
            EXECUTE format('ALTER TABLE %I ALTER COLUMN %I SET NOT NULL', t || '_19700101', col);
        END LOOP;
        EXECUTE format('ALTER TABLE %I ALTER COLUMN part_day SET NOT NULL', t || '_19700101');
        FOR col, def IN SELECT c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c
                        WHERE c.conrelid = t::regclass AND c.contype = 'c' LOOP
            EXECUTE format('ALTER TABLE %I ADD CONSTRAINT %I %s', t || '_19700101', col, def);
        END LOOP;
        EXECUTE format('DROP TABLE %I', t);
        EXECUTE format('CREATE SEQUENCE %I', t || '_id_seq');
        PERFORM setval(t || '_id_seq', next);
    END LOOP;
END
$$;
-- +goose StatementEnd

ALTER TABLE IF EXISTS attempts RENAME TO attempts_19700101;
ALTER TABLE attempts_19700101 DROP CONSTRAINT IF EXISTS attempts_pkey;
DROP INDEX IF EXISTS attempts_finished_brin;
ALTER TABLE attempts_19700101 ADD COLUMN IF NOT EXISTS part_day date NOT NULL DEFAULT '1970-01-01';
ALTER TABLE attempts_19700101 ALTER COLUMN part_day DROP DEFAULT;

ALTER TABLE IF EXISTS audit RENAME TO audit_19700101;
ALTER TABLE audit_19700101 DROP CONSTRAINT IF EXISTS audit_pkey;
DROP INDEX IF EXISTS audit_action_idx;
ALTER TABLE audit_19700101 ADD COLUMN IF NOT EXISTS part_day date NOT NULL DEFAULT '1970-01-01';
ALTER TABLE audit_19700101 ALTER COLUMN part_day DROP DEFAULT;

-- The identities' sequences carry the tables' names: each hands its next value
-- to the plain sequence that replaces it, under the same name (made above on
-- a Citus cluster distributed before).
-- +goose StatementBegin
DO $$
DECLARE
    t    text;
    next bigint;
BEGIN
    FOREACH t IN ARRAY ARRAY['attempts', 'audit'] LOOP
        CONTINUE WHEN pg_get_serial_sequence(t || '_19700101', 'id') IS NULL;
        next := nextval(pg_get_serial_sequence(t || '_19700101', 'id'));
        EXECUTE format('ALTER TABLE %I ALTER COLUMN id DROP IDENTITY', t || '_19700101');
        EXECUTE format('CREATE SEQUENCE %I', t || '_id_seq');
        PERFORM setval(t || '_id_seq', next);
    END LOOP;
END
$$;
-- +goose StatementEnd

-- Every call to a destination (or lookup), written as started before the call.
-- (Its checks are named as the old table's, which its partition keeps.)
CREATE TABLE attempts (
    id            bigint      NOT NULL DEFAULT nextval('attempts_id_seq'),
    client        text        NOT NULL,
    action_id     bigint      NOT NULL,
    kind          text        NOT NULL CONSTRAINT attempts_kind_check CHECK (kind IN ('call', 'lookup')),
    operation_key text        NOT NULL,
    worker        text        NOT NULL,
    status        text        NOT NULL DEFAULT 'started'
                  CONSTRAINT attempts_status_check CHECK (status IN ('started', 'finished', 'abandoned')),
    observed      text        NOT NULL DEFAULT '',   -- the decision table's row
    http_status   integer,
    error         text        NOT NULL DEFAULT '',
    evidence      text        NOT NULL DEFAULT '',
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    part_day      date        NOT NULL,              -- the action's rows_day when written
    PRIMARY KEY (client, action_id, id, part_day)
) PARTITION BY RANGE (part_day);
ALTER SEQUENCE attempts_id_seq OWNED BY attempts.id;
CREATE INDEX attempts_finished_brin ON attempts USING brin (finished_at);

-- Who did what to an action, when and why.
CREATE TABLE audit (
    id        bigint      NOT NULL DEFAULT nextval('audit_id_seq'),
    client    text        NOT NULL,
    action_id bigint      NOT NULL,
    actor     text        NOT NULL,
    act       text        NOT NULL,
    note      text        NOT NULL DEFAULT '',
    detail    jsonb       NOT NULL DEFAULT '{}',
    at        timestamptz NOT NULL DEFAULT now(),
    part_day  date        NOT NULL,                  -- the action's rows_day when written
    PRIMARY KEY (client, id, part_day)
) PARTITION BY RANGE (part_day);
ALTER SEQUENCE audit_id_seq OWNED BY audit.id;
CREATE INDEX audit_action_idx ON audit (client, action_id, id);
ALTER TABLE attempts ATTACH PARTITION attempts_19700101 FOR VALUES FROM (MINVALUE) TO ('1970-01-02');
ALTER TABLE audit ATTACH PARTITION audit_19700101 FOR VALUES FROM (MINVALUE) TO ('1970-01-02');

-- Daily partitions as event_bodies has them (00038); an attempt's partition is
-- updated in place when the outcome is recorded, as the table was (00006).
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION oncehook_partitions_make(parent text, first_day date, last_day date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    d      date;
    part   text;
    locked boolean := false;
    made   integer := 0;
BEGIN
    FOR d IN SELECT g::date FROM generate_series(first_day, last_day, interval '1 day') AS g LOOP
        part := parent || '_' || to_char(d, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(quote_ident(part)) IS NOT NULL;
        IF NOT locked THEN
            PERFORM pg_advisory_xact_lock(hashtext('oncehook_partitions'));
            locked := true;
        END IF;
        -- Read from the catalog as it stands now (a volatile function's statement
        -- takes a new snapshot): a caller that held the lock before may have made it.
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_class c
                              WHERE c.relname = part AND c.relnamespace = current_schema()::regnamespace);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)%s', part, parent, d, d + 1,
                       CASE WHEN parent = 'attempts' THEN ' WITH (fillfactor = 70)' ELSE '' END);
        made := made + 1;
    END LOOP;
    RETURN made;
END
$$;
-- +goose StatementEnd

-- The days around the migration's (fewer than 00038 made: on Citus each day is
-- a table on every shard); the servers make
-- those ahead of them at start and every hour (internal/partitions).
SELECT oncehook_partitions_make('attempts', (now() AT TIME ZONE 'UTC')::date - 1,
                                (now() AT TIME ZONE 'UTC')::date + 1);
SELECT oncehook_partitions_make('audit', (now() AT TIME ZONE 'UTC')::date - 1,
                                (now() AT TIME ZONE 'UTC')::date + 1);

-- +goose Down
-- Every row goes back into the table as it was, with its identity and its
-- reference to its action.
-- +goose StatementBegin
DO $$
DECLARE
    t    text;
    p    text;
    next bigint;
BEGIN
    FOREACH t IN ARRAY ARRAY['attempts', 'audit'] LOOP
        EXECUTE format('ALTER TABLE %I DETACH PARTITION %I', t, t || '_19700101');
        EXECUTE format('INSERT INTO %I SELECT * FROM %I', t || '_19700101', t);
        next := nextval(t || '_id_seq');
        FOR p IN SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                 WHERE i.inhparent = t::regclass LOOP
            EXECUTE format('DROP TABLE %I', p);
        END LOOP;
        EXECUTE format('DROP TABLE %I', t);
        EXECUTE format('ALTER TABLE %I RENAME TO %I', t || '_19700101', t);
        EXECUTE format('ALTER TABLE %I DROP COLUMN part_day', t);
        EXECUTE format('ALTER TABLE %I ALTER COLUMN id ADD GENERATED ALWAYS AS IDENTITY (START WITH %s)', t, next);
        EXECUTE format('ALTER TABLE %I ADD FOREIGN KEY (client, action_id) REFERENCES actions (client, id) ON DELETE CASCADE', t);
    END LOOP;
END
$$;
-- +goose StatementEnd
ALTER TABLE attempts ADD PRIMARY KEY (client, action_id, id);
ALTER TABLE attempts SET (fillfactor = 70);
CREATE INDEX attempts_finished_brin ON attempts USING brin (finished_at);
ALTER TABLE audit ADD PRIMARY KEY (client, id);
CREATE INDEX audit_action_idx ON audit (client, action_id, id);
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION oncehook_partitions_make(parent text, first_day date, last_day date) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    d      date;
    part   text;
    locked boolean := false;
    made   integer := 0;
BEGIN
    FOR d IN SELECT g::date FROM generate_series(first_day, last_day, interval '1 day') AS g LOOP
        part := parent || '_' || to_char(d, 'YYYYMMDD');
        CONTINUE WHEN to_regclass(quote_ident(part)) IS NOT NULL;
        IF NOT locked THEN
            PERFORM pg_advisory_xact_lock(hashtext('oncehook_partitions'));
            locked := true;
        END IF;
        CONTINUE WHEN EXISTS (SELECT 1 FROM pg_class c
                              WHERE c.relname = part AND c.relnamespace = current_schema()::regnamespace);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', part, parent, d, d + 1);
        made := made + 1;
    END LOOP;
    RETURN made;
END
$$;
-- +goose StatementEnd
ALTER TABLE actions DROP COLUMN rows_day;
