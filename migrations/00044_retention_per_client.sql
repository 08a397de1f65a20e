-- +goose Up
-- Closed actions are pruned client by client, each client with its own window
-- where the config gives it one (clients: {NAME: {retention: {actions: ...}}}):
-- the pruning index leads with the client, so a client's batch reads that
-- client's oldest closed actions and nothing of the others'. One index, as
-- before: an action's close maintains it as it did the one it replaces.
DROP INDEX actions_closed_idx;
CREATE INDEX actions_closed_idx ON actions (client, updated_at)
    WHERE state IN ('confirmed', 'resolved', 'cancelled');

-- +goose Down
DROP INDEX actions_closed_idx;
CREATE INDEX actions_closed_idx ON actions (updated_at)
    WHERE state IN ('confirmed', 'resolved', 'cancelled');
