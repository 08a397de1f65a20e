-- +goose Up
-- Sharding by client, on a database with the citus extension: every table of one
-- client's work is distributed by client, all co-located (a client's events,
-- actions and their rows live on one node, so each statement the workers send
-- reads and writes one shard); the small shared tables become reference tables,
-- copied to every node. Without citus it does nothing. A database migrated
-- before citus was installed is distributed by calling it again
-- (oncehook citus distribute); it skips the tables already done.
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
-- +goose StatementBegin
CREATE FUNCTION oncehook_distribute() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    t     text;
    first boolean;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'citus') THEN
        RETURN 'single';
    END IF;
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
    -- Referenced tables first: the foreign keys lead with client.
    FOREACH t IN ARRAY ARRAY['events', 'actions', 'event_queue', 'event_conflicts', 'event_audit',
                             'action_events', 'attempts', 'audit', 'resources', 'notifications'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = t::regclass) THEN
            PERFORM create_distributed_table(t, 'client', colocate_with => CASE WHEN t = 'events' THEN 'default' ELSE 'events' END);
        END IF;
    END LOOP;
    IF first THEN
        CREATE TRIGGER events_enqueue AFTER INSERT ON events
            FOR EACH ROW EXECUTE FUNCTION events_enqueue_row();
    END IF;
    FOREACH t IN ARRAY ARRAY['destinations', 'users', 'api_tokens', 'sessions', 'login_throttle',
                             'owner_digests', 'backfill_state', 'oauth_tokens', 'trend_counts',
                             'trend_horizon'] LOOP
        IF NOT EXISTS (SELECT 1 FROM pg_dist_partition WHERE logicalrelid = t::regclass) THEN
            PERFORM create_reference_table(t);
        END IF;
    END LOOP;
    RETURN 'citus';
END
$$;
-- +goose StatementEnd
SELECT oncehook_distribute();

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
