-- +goose Up
-- The action ledger: one row per business operation. The operation identity is
-- (client, environment, name, business key); operation_key is its opaque hash and
-- is unique per client, so a second event asking for the same work finds this row.
CREATE TABLE actions (
    id               bigint GENERATED ALWAYS AS IDENTITY,
    client           text        NOT NULL,
    environment      text        NOT NULL,
    source           text        NOT NULL,
    name             text        NOT NULL,
    business_key     text        NOT NULL,            -- readable key parts, for people and search
    key_parts        jsonb       NOT NULL,
    operation_key    text        NOT NULL,            -- what the destination sees
    destination      text        NOT NULL,
    params           jsonb       NOT NULL,
    params_sha256    bytea       NOT NULL,
    state            text        NOT NULL DEFAULT 'pending'
                     CHECK (state IN ('pending', 'processing', 'retrying', 'held', 'uncertain',
                                      'failed', 'confirmed', 'resolved', 'cancelled')),
    reason           text        NOT NULL DEFAULT '',
    owner            text        NOT NULL DEFAULT '',
    after_id         bigint,                          -- waits until this action is confirmed
    resource         text        NOT NULL DEFAULT '',
    occurred_at      timestamptz,
    attempts         integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    give_up_at       timestamptz NOT NULL,
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    first_attempt_at timestamptz,
    last_attempt_at  timestamptz,
    lease_owner      text,
    claimed_from     text        NOT NULL DEFAULT '', -- the state a worker claimed it from
    lease_expires_at timestamptz,
    external_ref     text        NOT NULL DEFAULT '',
    result           jsonb,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, id),
    UNIQUE (client, operation_key)
);
CREATE INDEX actions_id_idx ON actions (id);
-- Claims: due work, oldest first, touching only the rows that can run.
CREATE INDEX actions_due_idx ON actions (next_attempt_at, id)
    WHERE state IN ('pending', 'retrying', 'uncertain');
CREATE INDEX actions_lease_idx ON actions (lease_expires_at) WHERE state = 'processing';
-- Queues and filters: keyset pagination by id within a state.
CREATE INDEX actions_state_idx ON actions (state, id DESC);
CREATE INDEX actions_owner_idx ON actions (owner, state, id DESC);
CREATE INDEX actions_after_idx ON actions (client, after_id) WHERE after_id IS NOT NULL;
CREATE INDEX actions_resource_idx ON actions (client, source, resource) WHERE resource <> '';

-- Which events asked for which action, with the params each one asked for.
CREATE TABLE action_events (
    client        text        NOT NULL,
    action_id     bigint      NOT NULL,
    event_id      bigint      NOT NULL,
    params        jsonb       NOT NULL,
    params_sha256 bytea       NOT NULL,
    conflict      boolean     NOT NULL DEFAULT false,
    linked_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, action_id, event_id),
    FOREIGN KEY (client, action_id) REFERENCES actions (client, id) ON DELETE CASCADE
);
CREATE INDEX action_events_event_idx ON action_events (client, event_id);

-- Every call to a destination (or lookup), written as started before the call.
CREATE TABLE attempts (
    id            bigint GENERATED ALWAYS AS IDENTITY,
    client        text        NOT NULL,
    action_id     bigint      NOT NULL,
    kind          text        NOT NULL CHECK (kind IN ('call', 'lookup')),
    operation_key text        NOT NULL,
    worker        text        NOT NULL,
    status        text        NOT NULL DEFAULT 'started' CHECK (status IN ('started', 'finished', 'abandoned')),
    observed      text        NOT NULL DEFAULT '',   -- the decision table's row
    http_status   integer,
    error         text        NOT NULL DEFAULT '',
    evidence      text        NOT NULL DEFAULT '',
    started_at    timestamptz NOT NULL DEFAULT now(),
    finished_at   timestamptz,
    PRIMARY KEY (client, id),
    FOREIGN KEY (client, action_id) REFERENCES actions (client, id) ON DELETE CASCADE
);
CREATE INDEX attempts_action_idx ON attempts (client, action_id, id);
CREATE INDEX attempts_started_idx ON attempts (client, action_id) WHERE status = 'started';

-- Who did what to an action, when and why.
CREATE TABLE audit (
    id        bigint GENERATED ALWAYS AS IDENTITY,
    client    text        NOT NULL,
    action_id bigint      NOT NULL,
    actor     text        NOT NULL,
    act       text        NOT NULL,
    note      text        NOT NULL DEFAULT '',
    detail    jsonb       NOT NULL DEFAULT '{}',
    at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (client, id),
    FOREIGN KEY (client, action_id) REFERENCES actions (client, id) ON DELETE CASCADE
);
CREATE INDEX audit_action_idx ON audit (client, action_id, id);

-- The newest time seen and any cancellation per resource, for staleness.
CREATE TABLE resources (
    client           text        NOT NULL,
    source           text        NOT NULL,
    resource         text        NOT NULL,
    last_occurred_at timestamptz,
    cancelled_at     timestamptz,
    PRIMARY KEY (client, source, resource)
);

-- Destinations are configuration; this row is their connection state.
CREATE TABLE destinations (
    name            text        PRIMARY KEY,
    status          text        NOT NULL DEFAULT 'connected' CHECK (status IN ('connected', 'disconnected')),
    reason          text        NOT NULL DEFAULT '',
    changed_at      timestamptz NOT NULL DEFAULT now()
);

-- People and API tokens are global, not per client.
CREATE TABLE users (
    id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    email         text        NOT NULL,
    role          text        NOT NULL CHECK (role IN ('admin', 'operator')),
    password_hash text        NOT NULL,
    disabled      boolean     NOT NULL DEFAULT false,
    created_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_idx ON users (lower(email));

CREATE TABLE api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text        NOT NULL,
    role         text        NOT NULL CHECK (role IN ('admin', 'operator')),
    token_sha256 bytea       NOT NULL UNIQUE,
    created_at   timestamptz NOT NULL DEFAULT now(),
    revoked_at   timestamptz
);

-- +goose Down
DROP TABLE api_tokens;
DROP TABLE users;
DROP TABLE destinations;
DROP TABLE resources;
DROP TABLE audit;
DROP TABLE attempts;
DROP TABLE action_events;
DROP TABLE actions;
