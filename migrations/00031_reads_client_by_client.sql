-- +goose Up
-- On Citus the dashboard's reads across clients run client by client, each routed
-- to the client's shard (see ledger's readClients), and a shard can hold several
-- clients. Two things keep those reads as cheap as on one Postgres:

-- The queues' trend counts each client's actions that wait for a person along
-- actions_waiting_idx; with the client in the index it counts from the index alone
-- instead of reading each row to check its client (one Postgres reads no row
-- either way). A healthy flow never enters these states, so the workers' writes
-- still never touch it.
DROP INDEX actions_waiting_idx;
CREATE INDEX actions_waiting_idx ON actions (state, state_since, id) INCLUDE (client)
    WHERE state IN ('held', 'uncertain', 'failed');

-- A source belongs to one client, so a planner taking "client = $1 AND source =
-- $2" as independent would underestimate a source's events on a shard of several
-- clients; the sources page asks the shard's planner for that very estimate
-- (db.EstimateEvents). This tells it that the source decides the client. Citus
-- creates it on every shard of events.
CREATE STATISTICS events_source_client (dependencies) ON source, client FROM events;

-- +goose Down
DROP STATISTICS events_source_client;
DROP INDEX actions_waiting_idx;
CREATE INDEX actions_waiting_idx ON actions (state, state_since, id)
    WHERE state IN ('held', 'uncertain', 'failed');
