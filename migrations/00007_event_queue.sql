-- +goose Up
-- The router's queue of received events, kept beside the inbox rather than as an
-- index on its status. Routing then changes no indexed column of events, so Postgres
-- can write the new status in place (a HOT update) instead of adding an entry to
-- every index of the inbox, on the very index pages new deliveries are added to.
CREATE TABLE event_queue (
    client text   NOT NULL,
    id     bigint NOT NULL,
    PRIMARY KEY (client, id)
);
CREATE INDEX event_queue_id_idx ON event_queue (id);

-- Every new event joins the queue, whoever inserts it: also a process of the release
-- before this one, still taking deliveries during a rolling deploy. One insert per
-- statement, from the statement's new rows.
-- +goose StatementBegin
CREATE FUNCTION events_enqueue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO event_queue (client, id)
    SELECT client, id FROM new_events WHERE status = 'received'
    ON CONFLICT DO NOTHING;
    RETURN NULL;
END
$$;
-- +goose StatementEnd
CREATE TRIGGER events_enqueue AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION events_enqueue();

INSERT INTO event_queue (client, id) SELECT client, id FROM events WHERE status = 'received';
DROP INDEX events_received_idx;

-- +goose Down
CREATE INDEX events_received_idx ON events (id) WHERE status = 'received';
DROP TRIGGER events_enqueue ON events;
DROP FUNCTION events_enqueue();
DROP TABLE event_queue;
