-- +goose Up
-- Notifications to owners: one row per (action, state) ever reported, so nothing is
-- sent twice for the same item and state.
CREATE TABLE notifications (
    client    text        NOT NULL,
    action_id bigint      NOT NULL,
    state     text        NOT NULL,
    owner     text        NOT NULL,
    status    text        NOT NULL DEFAULT 'claimed' CHECK (status IN ('claimed', 'sent', 'failed')),
    at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, action_id, state),
    FOREIGN KEY (client, action_id) REFERENCES actions (client, id) ON DELETE CASCADE
);

-- When each owner last got a digest: at most one per interval.
CREATE TABLE owner_digests (
    owner        text        PRIMARY KEY,
    last_sent_at timestamptz NOT NULL
);

-- Actions that need a person, for the notifier and the metrics: small, hot sets.
CREATE INDEX actions_attention_idx ON actions (state, updated_at)
    WHERE state IN ('failed', 'held', 'uncertain');

-- Pruning: closed actions by age.
CREATE INDEX actions_closed_idx ON actions (updated_at)
    WHERE state IN ('confirmed', 'resolved', 'cancelled');

-- +goose Down
DROP INDEX actions_closed_idx;
DROP INDEX actions_attention_idx;
DROP TABLE owner_digests;
DROP TABLE notifications;
