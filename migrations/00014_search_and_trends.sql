-- +goose Up
-- The search box finds an action by its business key (or the key's beginning, in
-- any case), its operation key, its external ref, its owner or an event id, across
-- every state. Each of those is an index probe: the operation key goes through the
-- (client, operation_key) key, an event id through the inbox's own key, an owner
-- through actions_owner_idx; these two cover the rest, so a search costs the same
-- with a thousand actions or a million. external_ref is empty until a destination
-- answers, and an empty ref is never searched for.
CREATE INDEX actions_business_key_idx ON actions (lower(business_key) text_pattern_ops);
CREATE INDEX actions_external_ref_idx ON actions (external_ref) WHERE external_ref <> '';

-- The actions that wait for a person, by how long each has waited in its state:
-- "oldest waiting" and the queue trends count along it without reading a row. A
-- healthy flow never enters these states, so the workers' writes never touch it.
CREATE INDEX actions_waiting_idx ON actions (state, state_since, id)
    WHERE state IN ('held', 'uncertain', 'failed');

-- Trends: actions created and calls failed, per destination and five minutes, for
-- the five minutes that are over. Both only grow with time (created_at and an
-- attempt's finished_at never change), so a bucket counted once stays right, and a
-- week's chart reads a few hundred rows instead of a week of actions.
CREATE TABLE trend_counts (
    kind        text        NOT NULL CHECK (kind IN ('new', 'failed')),
    destination text        NOT NULL,
    bucket      timestamptz NOT NULL,
    n           bigint      NOT NULL,
    PRIMARY KEY (kind, bucket, destination)
);

-- How far trend_counts reaches: everything before counted_until is in it. One row;
-- the process that counts holds it locked.
CREATE TABLE trend_horizon (
    one           boolean     PRIMARY KEY DEFAULT true CHECK (one),
    counted_until timestamptz NOT NULL
);
INSERT INTO trend_horizon (counted_until) VALUES ('epoch');

-- +goose Down
DROP TABLE trend_horizon;
DROP TABLE trend_counts;
DROP INDEX actions_waiting_idx;
DROP INDEX actions_external_ref_idx;
DROP INDEX actions_business_key_idx;
