-- +goose Up
-- Deliveries' bytes apart from their identities. The identity of a delivery and
-- its routing state stay in events, whose unique key (client, source,
-- source_event_id) deduplicates every redelivery whenever it comes: a key with
-- time in it, as a partitioned table's must have, would let a redelivery that lands
-- in another partition pass as new. The bytes that make up the volume (the raw
-- body, the payload the rules read, the headers) go to event_bodies, partitioned
-- by the day they were written (body_day, UTC), so that retention drops a day's
-- partition instead of deleting its rows (see docs/operations.md).
--
-- events.body_day says in which partition the body was written: readers join on it
-- and read one partition. NULL for an event stored before this migration, whose
-- bytes are still in events.body, payload and headers: readers take those then.
ALTER TABLE events ADD COLUMN body_day date;

CREATE TABLE event_bodies (
    client   text   NOT NULL,
    event_id bigint NOT NULL,
    day      date   NOT NULL,
    body     bytea,                  -- exact raw bytes
    payload  bytea,                  -- the JSON the rules read when it is not the body
    headers  jsonb  NOT NULL DEFAULT '{}',
    PRIMARY KEY (client, event_id, day)
) PARTITION BY RANGE (day);

-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE event_bodies ALTER COLUMN body SET COMPRESSION lz4,
                             ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL; -- a server built without lz4: the default compression stays
END
$$;
-- +goose StatementEnd

-- oncehook_partitions_make makes the daily partitions of a table (by name, in the
-- schema's search path) partitioned by day from first_day to last_day, those it
-- does not have yet, and returns how many it made. Named <table>_YYYYMMDD, each
-- holds one day; there is never a DEFAULT partition, where rows would pile up that
-- no drop can remove. The servers and an insert that found its day missing may all
-- call it at once: a missing day is made under a transaction-level lock, by one
-- caller; a call that finds every day there takes no lock. On Citus, a partition
-- made of a distributed table is distributed with it.
-- +goose StatementBegin
CREATE FUNCTION oncehook_partitions_make(parent text, first_day date, last_day date) RETURNS integer
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
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)', part, parent, d, d + 1);
        made := made + 1;
    END LOOP;
    RETURN made;
END
$$;
-- +goose StatementEnd

-- The partitions of the days around the migration's; the servers make those
-- ahead of them from then on (internal/partitions).
SELECT oncehook_partitions_make('event_bodies', (now() AT TIME ZONE 'UTC')::date - 1,
                                (now() AT TIME ZONE 'UTC')::date + 8);

-- The tables the sharding rule covers (see 00024) leave out the partitions: Citus
-- distributes a partitioned table with its partitions, and refuses one on its own.
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION oncehook_schema_tables() RETURNS TABLE (tbl regclass, kind text) LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass,
           CASE WHEN EXISTS (SELECT 1 FROM pg_attribute a
                             WHERE a.attrelid = c.oid AND a.attname = 'client' AND NOT a.attisdropped)
                THEN 'distributed' ELSE 'reference' END
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition
      AND c.relname <> 'goose_db_version'
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION oncehook_schema_tables() RETURNS TABLE (tbl regclass, kind text) LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass,
           CASE WHEN EXISTS (SELECT 1 FROM pg_attribute a
                             WHERE a.attrelid = c.oid AND a.attname = 'client' AND NOT a.attisdropped)
                THEN 'distributed' ELSE 'reference' END
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname <> 'goose_db_version'
$$;
-- +goose StatementEnd
-- The bytes go back into the rows of their identities before their table goes.
UPDATE events e SET body = b.body, payload = b.payload, headers = b.headers
FROM event_bodies b WHERE b.client = e.client AND b.event_id = e.id AND b.day = e.body_day;
DROP FUNCTION oncehook_partitions_make(text, date, date);
DROP TABLE event_bodies;
ALTER TABLE events DROP COLUMN body_day;
