-- +goose Up
-- How an event reached the inbox: a webhook the provider posted, or a backfill pass
-- that listed it from the provider's API (docs/providers.md, "Backfill"). A constant default
-- adds the column without rewriting the inbox.
ALTER TABLE events ADD COLUMN via text NOT NULL DEFAULT 'webhook'
    CHECK (via IN ('webhook', 'backfill'));

-- The audit trail of acts on an event (a replay), who did them and why. The actions'
-- own trail (audit) is per action; a replay may start none.
CREATE TABLE event_audit (
    id       bigint GENERATED ALWAYS AS IDENTITY,
    client   text        NOT NULL,
    event_id bigint      NOT NULL,
    actor    text        NOT NULL,
    act      text        NOT NULL,
    note     text        NOT NULL DEFAULT '',
    detail   jsonb       NOT NULL DEFAULT '{}',
    at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, id),
    FOREIGN KEY (client, event_id) REFERENCES events (client, id) ON DELETE CASCADE
);
CREATE INDEX event_audit_event_idx ON event_audit (client, event_id, id);

-- +goose Down
DROP TABLE event_audit;
ALTER TABLE events DROP COLUMN via;
