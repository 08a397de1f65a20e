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
INSERT INTO event_queue (client, id) SELECT client, id FROM events WHERE status = 'received';
DROP INDEX events_received_idx;

-- +goose Down
CREATE INDEX events_received_idx ON events (id) WHERE status = 'received';
DROP TABLE event_queue;
