-- +goose Up
-- A person snoozes an action that waits for someone outside (the customer, the
-- CRM's admin): it leaves the queues' default view and the digests until then,
-- and comes back by itself. A snooze is a row of its own, never a column of the
-- action: the ledger's state and the workers' writes do not know of it. One row
-- an action, the latest snooze; it outlives its time until the action goes.
CREATE TABLE snoozes (
    client     text        NOT NULL,
    action_id  bigint      NOT NULL,
    until      timestamptz NOT NULL,
    snoozed_by text        NOT NULL,
    snoozed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, action_id),
    FOREIGN KEY (client, action_id) REFERENCES actions (client, id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE snoozes;
