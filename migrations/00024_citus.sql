-- +goose Up
-- Sharding by client, on a database with the citus extension. The functions are
-- defined here and run after every migration (db.Migrate, oncehook citus
-- distribute), so a table a later migration adds is distributed by the same rule:
-- a table with a client column is distributed by client, co-located with events
-- (a client's events, actions and their rows live on one node, so each statement
-- the workers send reads and writes one shard); every other table is small and
-- shared, and becomes a reference table, copied to every node. Without citus they
-- do nothing.

-- The tables the rule covers, each with what it becomes: every table of the
-- schema but goose's own record of migrations (and, on a node of a cluster, the
-- shards Citus keeps there).
-- +goose StatementBegin
CREATE FUNCTION oncehook_table_kinds() RETURNS TABLE (tbl regclass, kind text) LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN QUERY SELECT k.tbl, k.kind FROM oncehook_schema_tables() k;
    ELSE
        RETURN QUERY SELECT k.tbl, k.kind FROM oncehook_schema_tables() k WHERE NOT relation_is_a_known_shard(k.tbl);
    END IF;
END
$$;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE FUNCTION oncehook_schema_tables() RETURNS TABLE (tbl regclass, kind text) LANGUAGE sql STABLE AS $$
    SELECT c.oid::regclass,
           CASE WHEN EXISTS (SELECT 1 FROM pg_attribute a
                             WHERE a.attrelid = c.oid AND a.attname = 'client' AND NOT a.attisdropped)
                THEN 'distributed' ELSE 'reference' END
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname <> 'goose_db_version'
$$;
-- +goose StatementEnd

-- The router's queue on Citus: a trigger runs on each shard of events, where a
-- statement trigger has no transition table to read; this one queues each new
-- row on its own, into the co-located shard of the queue.
-- +goose StatementBegin
CREATE FUNCTION events_enqueue_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.status = 'received' THEN
        INSERT INTO event_queue (client, id) VALUES (NEW.client, NEW.id) ON CONFLICT DO NOTHING;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

-- oncehook_distribute distributes the tables not distributed yet, a table after
-- the tables its foreign keys reference (reference tables first: a distributed
-- table may reference one, never the other way round), and returns the mode it
-- leaves the database in. It copies the rows of a table it distributes.
-- +goose StatementBegin
CREATE FUNCTION oncehook_distribute() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t     regclass;
    k     text;
    first boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN 'single';
    END IF;
    PERFORM pg_advisory_xact_lock(hashtext('oncehook_distribute'));
    -- The state_since and enqueue triggers run on each shard, within its node:
    -- they touch their own row, or the co-located queue's shard.
    PERFORM set_config('citus.enable_unsafe_triggers', 'on', true);
    -- The statement trigger goes before events is distributed, and the row trigger
    -- comes once the queue is too: copying rows into the shards runs no trigger
    -- then, and every row in the queue stays where it was.
    SELECT NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'events'::regclass) INTO first;
    IF first THEN
        DROP TRIGGER IF EXISTS events_enqueue ON events;
    END IF;
    -- Done: distributed by hash, or a reference table. A table with a foreign key
    -- to a reference table is made a Citus local table on the way (partmethod n,
    -- repmodel s), which is not done yet.
    LOOP
        SELECT r.tbl, r.kind INTO t, k FROM oncehook_table_kinds() r
        WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition p
                          WHERE p.logicalrelid = r.tbl AND (p.partmethod = 'h' OR p.repmodel = 't'))
          AND NOT EXISTS (SELECT 1 FROM pg_constraint f
                          WHERE f.conrelid = r.tbl AND f.contype = 'f' AND f.confrelid <> r.tbl
                            AND NOT EXISTS (SELECT 1 FROM pg_dist_partition p
                                            WHERE p.logicalrelid = f.confrelid AND (p.partmethod = 'h' OR p.repmodel = 't')))
        ORDER BY r.kind = 'reference' DESC, r.tbl = 'events'::regclass DESC, r.tbl::text
        LIMIT 1;
        EXIT WHEN NOT FOUND;
        IF k = 'reference' THEN
            PERFORM create_reference_table(t);
        ELSE
            PERFORM create_distributed_table(t, 'client', colocate_with =>
                CASE WHEN t = 'events'::regclass THEN 'default' ELSE 'events' END);
        END IF;
    END LOOP;
    IF first THEN
        CREATE TRIGGER events_enqueue AFTER INSERT ON events
            FOR EACH ROW EXECUTE FUNCTION events_enqueue_row();
    END IF;
    SELECT string_agg(r.tbl::text, ', ') INTO k FROM oncehook_table_kinds() r
    WHERE NOT EXISTS (SELECT 1 FROM pg_dist_partition p
                      WHERE p.logicalrelid = r.tbl AND (p.partmethod = 'h' OR p.repmodel = 't'));
    IF k IS NOT NULL THEN
        RAISE EXCEPTION 'cannot distribute %: a foreign key references a table that is not distributed', k;
    END IF;
    RETURN 'citus';
END
$$;
-- +goose StatementEnd

-- Which mode the database is in, for the start-up line and oncehook migrate:
-- single, citus (distributed), or citus-undistributed (the extension is there
-- but the tables were made before it: oncehook citus distribute).
-- +goose StatementBegin
CREATE FUNCTION oncehook_mode() RETURNS text LANGUAGE plpgsql STABLE AS $$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN 'single';
    END IF;
    IF EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = 'events'::regclass) THEN
        RETURN 'citus';
    END IF;
    RETURN 'citus-undistributed';
END
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION oncehook_mode();
DROP FUNCTION oncehook_distribute();
DROP FUNCTION events_enqueue_row();
DROP FUNCTION oncehook_table_kinds();
DROP FUNCTION oncehook_schema_tables();
