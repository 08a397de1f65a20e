-- +goose Up
-- Trends are counted per client too, so a person who sees some clients sees only
-- their counts. The counts so far have no client: they are dropped and the horizon
-- goes back, so the next trends page counts the last week again, per client.
DELETE FROM trend_counts;
ALTER TABLE trend_counts DROP CONSTRAINT trend_counts_pkey;
ALTER TABLE trend_counts ADD COLUMN client text NOT NULL DEFAULT '';
ALTER TABLE trend_counts ADD PRIMARY KEY (kind, bucket, client, destination);
UPDATE trend_horizon SET counted_until = 'epoch';

-- +goose Down
DELETE FROM trend_counts;
ALTER TABLE trend_counts DROP CONSTRAINT trend_counts_pkey;
ALTER TABLE trend_counts DROP COLUMN client;
ALTER TABLE trend_counts ADD PRIMARY KEY (kind, bucket, destination);
UPDATE trend_horizon SET counted_until = 'epoch';
