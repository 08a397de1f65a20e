-- +goose Up
-- Every `serve`, `worker` and `migrate` looks for the events stored before
-- event_bodies (body_day NULL) to move their bytes (EventBodiesMoveOld), once a
-- client: without an index that was a read of every event, 3.5 s a client at ten
-- million events, at every start of every process. Only those events are in this
-- index: none once they have moved.
CREATE INDEX events_before_bodies_idx ON events (client, id) WHERE body_day IS NULL;

-- +goose Down
DROP INDEX events_before_bodies_idx;
