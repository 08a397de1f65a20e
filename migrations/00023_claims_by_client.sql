-- +goose Up
-- Claims go round the clients: each names one client and takes its due work,
-- oldest first, so one client's backlog does not hold up another's actions (and,
-- sharded by client, a claim reads one shard).
DROP INDEX actions_due_idx;
CREATE INDEX actions_due_idx ON actions (client, next_attempt_at, id)
    WHERE state IN ('pending', 'retrying', 'uncertain');

-- +goose Down
DROP INDEX actions_due_idx;
CREATE INDEX actions_due_idx ON actions (next_attempt_at, id)
    WHERE state IN ('pending', 'retrying', 'uncertain');
