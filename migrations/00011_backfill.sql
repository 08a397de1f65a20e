-- +goose Up
-- One row per backfilled source: when its next pass is due, the lease of the process
-- running one (so one pass at a time runs across processes), and what the last pass
-- found, for the sources page.
CREATE TABLE backfill_state (
    client       text        NOT NULL,
    source       text        NOT NULL,
    next_at      timestamptz NOT NULL DEFAULT now(),
    lease_until  timestamptz,
    lease_owner  text        NOT NULL DEFAULT '',
    started_at   timestamptz,
    finished_at  timestamptz,
    listed       integer     NOT NULL DEFAULT 0, -- what the provider listed in the window
    missing      integer     NOT NULL DEFAULT 0, -- of those, the ones the inbox lacked
    stored       integer     NOT NULL DEFAULT 0, -- stored as backfilled events (Stripe)
    redelivered  integer     NOT NULL DEFAULT 0, -- redeliveries asked for (GitHub)
    error        text        NOT NULL DEFAULT '',
    failures     integer     NOT NULL DEFAULT 0, -- passes failed in a row
    passes       bigint      NOT NULL DEFAULT 0,
    PRIMARY KEY (client, source)
);

-- +goose Down
DROP TABLE backfill_state;
