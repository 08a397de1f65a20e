-- +goose Up
-- A correction is a person's edit of a rejected request's params, approved or
-- refused by a person with the right to (the decision table, docs/how-it-works.md: "a person
-- corrects a rejected request"). At most one waits for a decision per action.
CREATE TABLE corrections (
    id              bigint GENERATED ALWAYS AS IDENTITY,
    client          text        NOT NULL,
    action_id       bigint      NOT NULL,
    original        jsonb       NOT NULL,            -- the params the destination rejected
    params          jsonb       NOT NULL,            -- the corrected params
    provider_reason text        NOT NULL DEFAULT '',
    note            text        NOT NULL DEFAULT '',
    proposed_by     text        NOT NULL,
    proposed_at     timestamptz NOT NULL DEFAULT now(),
    state           text        NOT NULL DEFAULT 'proposed'
                    CHECK (state IN ('proposed', 'approved', 'refused')),
    decided_by      text        NOT NULL DEFAULT '',
    decided_at      timestamptz,
    decision_note   text        NOT NULL DEFAULT '',
    attempt_key     text        NOT NULL DEFAULT '', -- the new attempt identity, when one was needed
    PRIMARY KEY (client, id)
);
CREATE UNIQUE INDEX corrections_open_idx ON corrections (client, action_id) WHERE state = 'proposed';
CREATE INDEX corrections_action_idx ON corrections (client, action_id, id);

-- attempt_key is what the destination sees instead of operation_key once an
-- approved correction needed a new attempt identity; '' means operation_key.
ALTER TABLE actions ADD COLUMN attempt_key text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE actions DROP COLUMN attempt_key;
DROP TABLE corrections;
