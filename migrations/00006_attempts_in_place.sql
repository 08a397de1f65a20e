-- +goose Up
-- Finishing an attempt then changes no indexed column, so Postgres can update the
-- row in place (a HOT update, writing no index entry) when its page has room. The
-- partial index on status goes: the queries that look for started attempts look at
-- one action's few attempts, through attempts_action_idx.
DROP INDEX attempts_started_idx;
ALTER TABLE attempts SET (fillfactor = 70);

-- +goose Down
ALTER TABLE attempts RESET (fillfactor);
CREATE INDEX attempts_started_idx ON attempts (client, action_id) WHERE status = 'started';
