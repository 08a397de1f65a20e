-- +goose Up
-- Trends count actions created, and calls failed, over the last hour, day or week.
-- Both columns grow with the table's physical order, so a BRIN index (a few pages,
-- next to nothing to keep up on insert) lets those counts skip everything older.
CREATE INDEX actions_created_brin ON actions USING brin (created_at);
CREATE INDEX attempts_finished_brin ON attempts USING brin (finished_at);

-- +goose Down
DROP INDEX attempts_finished_brin;
DROP INDEX actions_created_brin;
