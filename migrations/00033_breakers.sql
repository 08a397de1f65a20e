-- +goose Up
-- A breaker per destination, kept on the destination's row beside its connection
-- state: one API for every client that uses it, one outage, one breaker (on Citus
-- destinations is a reference table, so every shard's claim reads it locally).
-- The failure counts are not here: each process tallies its own calls in memory
-- (internal/ledger/breaker.go), and a change of state is the only shared write, a
-- conditional update that one process wins. A destination without a row is
-- connected and closed.
ALTER TABLE destinations
    ADD COLUMN breaker_state         text        NOT NULL DEFAULT 'closed'
                                     CHECK (breaker_state IN ('closed', 'open', 'half_open')),
    ADD COLUMN breaker_since         timestamptz NOT NULL DEFAULT now(),
    ADD COLUMN breaker_reason        text        NOT NULL DEFAULT '', -- the last unwell outcome, in words
    ADD COLUMN breaker_outage_at     timestamptz,                     -- when this outage began; null while closed
    ADD COLUMN breaker_probe_at      timestamptz,                     -- open: when a probe may go
    ADD COLUMN breaker_open_for      double precision NOT NULL DEFAULT 0, -- the wait before it, in seconds
    ADD COLUMN breaker_probe_owner   text        NOT NULL DEFAULT '',
    ADD COLUMN breaker_probe_until   timestamptz,                     -- half-open: the probe's lease
    ADD COLUMN breaker_last_probe_at timestamptz,
    ADD COLUMN breaker_last_probe    text        NOT NULL DEFAULT ''; -- its answer, in words

-- Every change of a breaker, with its time: the outage's history, and what a
-- later alert or a person's hand on the breaker is written beside.
CREATE TABLE breaker_transitions (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    destination text        NOT NULL,
    at          timestamptz NOT NULL DEFAULT now(),
    from_state  text        NOT NULL,
    to_state    text        NOT NULL,
    reason      text        NOT NULL DEFAULT '',
    actor       text        NOT NULL DEFAULT ''
);
CREATE INDEX breaker_transitions_destination_idx ON breaker_transitions (destination, id DESC);

-- +goose Down
DROP TABLE breaker_transitions;
ALTER TABLE destinations
    DROP COLUMN breaker_state, DROP COLUMN breaker_since, DROP COLUMN breaker_reason,
    DROP COLUMN breaker_outage_at, DROP COLUMN breaker_probe_at, DROP COLUMN breaker_open_for,
    DROP COLUMN breaker_probe_owner, DROP COLUMN breaker_probe_until,
    DROP COLUMN breaker_last_probe_at, DROP COLUMN breaker_last_probe;
