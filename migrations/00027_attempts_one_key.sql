-- +goose Up
-- An attempt is only ever looked up under its action: by (client, action_id) for an
-- action's attempts, and by (client, action_id, id) when its outcome is recorded.
-- attempts_action_idx held that key beside the primary key (client, id), which no
-- statement reads (nothing references attempts), so each attempt wrote two index
-- entries when it was started and two more when it finished (its finish is not a
-- HOT update while finished_at has its BRIN index, on PostgreSQL 15). The key
-- becomes the primary key, and each attempt writes one entry each time.
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD PRIMARY KEY (client, action_id, id);
DROP INDEX attempts_action_idx;

-- +goose Down
CREATE INDEX attempts_action_idx ON attempts (client, action_id, id);
ALTER TABLE attempts DROP CONSTRAINT attempts_pkey;
ALTER TABLE attempts ADD PRIMARY KEY (client, id);
