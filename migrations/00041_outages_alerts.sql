-- +goose Up
-- An outage is one fact: a destination's breaker opened at a time and closed at
-- another. A breaker that opens again within the quiet time after it closed
-- (flapping) continues the same outage: closed_at goes back to null and the
-- recovery not yet announced is cancelled. Each outage has one alert per
-- channel when it begins and one when it is over, written in the transaction
-- that changes the breaker and sent by a worker (internal/alerts), never by the
-- process that changed it. No client column: one outage serves every client
-- (on Citus, copied to every node as the destinations are).
CREATE TABLE outages (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination text        NOT NULL,
    opened_at   timestamptz NOT NULL DEFAULT now(),
    closed_at   timestamptz,                     -- null while the breaker is open or half-open
    reopened    integer     NOT NULL DEFAULT 0,  -- how often it opened again within the quiet time
    reason      text        NOT NULL DEFAULT '', -- the last unwell answer when it opened, in words
    opened_by   text        NOT NULL DEFAULT ''  -- who opened it: the workers, or a person by hand
);
-- At most one outage of a destination is going on.
CREATE UNIQUE INDEX outages_open_idx ON outages (destination) WHERE closed_at IS NULL;
CREATE INDEX outages_destination_idx ON outages (destination, id DESC);

-- The alerts of an outage: one per channel and kind. due_at is when it may be
-- sent: at once for down, the quiet time after closing for recovered.
CREATE TABLE alerts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    outage_id   bigint      NOT NULL REFERENCES outages (id) ON DELETE CASCADE,
    destination text        NOT NULL,
    channel     text        NOT NULL,
    kind        text        NOT NULL CHECK (kind IN ('down', 'recovered')),
    state       text        NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed', 'cancelled')),
    due_at      timestamptz NOT NULL DEFAULT now(), -- when it may be sent (again, after a failed attempt)
    created_at  timestamptz NOT NULL DEFAULT now(),
    sent_at     timestamptz
);
CREATE INDEX alerts_outage_idx ON alerts (outage_id);
CREATE INDEX alerts_due_idx ON alerts (due_at) WHERE state = 'pending';

-- Every attempt to send an alert: sent, or failed and why (shown on the
-- destination's page).
CREATE TABLE alert_attempts (
    id          bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    alert_id    bigint      NOT NULL REFERENCES alerts (id) ON DELETE CASCADE,
    at          timestamptz NOT NULL DEFAULT now(),
    ok          boolean     NOT NULL,
    http_status integer,
    error       text        NOT NULL DEFAULT ''
);
CREATE INDEX alert_attempts_alert_idx ON alert_attempts (alert_id, id);

-- +goose Down
DROP TABLE alert_attempts;
DROP TABLE alerts;
DROP TABLE outages;
