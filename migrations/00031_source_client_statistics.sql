-- +goose Up
-- A source belongs to one client, so the planner would underestimate the events
-- of "client = $1 AND source = $2" by taking the two as independent. On Citus
-- the sources page asks a client's shard for that very estimate (db.EstimateEvents),
-- and a shard can hold several clients: this tells its planner that the source
-- decides the client. Citus creates it on every shard of events.
CREATE STATISTICS events_source_client (dependencies) ON source, client FROM events;

-- +goose Down
DROP STATISTICS events_source_client;
