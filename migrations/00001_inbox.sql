-- +goose Up
-- The inbox: one row per delivery identity (client, source, source_event_id). Every
-- unique key leads with the client so the table can be sharded by client later.
CREATE TABLE events (
    id               bigint GENERATED ALWAYS AS IDENTITY,
    client           text        NOT NULL,
    environment      text        NOT NULL,
    source           text        NOT NULL,
    source_event_id  text        NOT NULL,
    type             text        NOT NULL,
    status           text        NOT NULL DEFAULT 'received'
                     CHECK (status IN ('received', 'routed', 'ignored', 'stale', 'conflict')),
    reason           text        NOT NULL DEFAULT '',
    body             bytea,                       -- exact raw bytes; NULL once pruned
    payload          bytea,                       -- the JSON the rules read when it is not the body (GitHub form posts)
    body_sha256      bytea       NOT NULL,
    headers          jsonb       NOT NULL DEFAULT '{}',
    occurred_at      timestamptz,                 -- the provider's own time, where it has one
    received_at      timestamptz NOT NULL DEFAULT now(),
    last_received_at timestamptz NOT NULL DEFAULT now(),
    deliveries       integer     NOT NULL DEFAULT 1,
    conflict         boolean     NOT NULL DEFAULT false,
    routed_at        timestamptz,
    PRIMARY KEY (client, id),
    UNIQUE (client, source, source_event_id)
);

-- The inbox is the work queue: the router claims received events oldest first.
CREATE INDEX events_received_idx ON events (id) WHERE status = 'received';
CREATE INDEX events_id_idx ON events (id);
CREATE INDEX events_source_idx ON events (source, id DESC);
CREATE INDEX events_received_at_idx ON events (received_at);

-- A repeat of a known delivery whose body differs: kept for inspection, never acted on.
CREATE TABLE event_conflicts (
    id          bigint GENERATED ALWAYS AS IDENTITY,
    client      text        NOT NULL,
    event_id    bigint      NOT NULL,
    body        bytea       NOT NULL,
    body_sha256 bytea       NOT NULL,
    headers     jsonb       NOT NULL DEFAULT '{}',
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, id),
    UNIQUE (client, event_id, body_sha256),
    FOREIGN KEY (client, event_id) REFERENCES events (client, id) ON DELETE CASCADE
);

-- +goose Down
DROP TABLE event_conflicts;
DROP TABLE events;
