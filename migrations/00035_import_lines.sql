-- +goose Up
-- The operations of a file being imported (oncehook import), staged in the
-- import's own transaction so that a file of any size is checked in bulk, against
-- itself and against the actions, and loaded with one statement, without holding
-- it in memory. A run's rows never outlive its transaction: they are deleted
-- before it commits, and a run that fails rolls them back. Distributed by client
-- on Citus, co-located with the actions they are checked against.
CREATE TABLE import_lines (
    client        text        NOT NULL,
    run           bigint      NOT NULL,
    line          bigint      NOT NULL,
    environment   text        NOT NULL,
    source        text        NOT NULL,
    name          text        NOT NULL,
    business_key  text        NOT NULL,
    key_parts     jsonb       NOT NULL,
    operation_key text        NOT NULL,
    destination   text        NOT NULL,
    params        jsonb       NOT NULL,
    params_sha256 bytea       NOT NULL,
    owner         text        NOT NULL,
    max_attempts  integer     NOT NULL,
    performed_at  timestamptz NOT NULL,
    external_ref  text        NOT NULL,
    result        jsonb,
    PRIMARY KEY (client, run, line)
);
CREATE INDEX import_lines_operation_idx ON import_lines (client, run, operation_key, line);

-- +goose Down
DROP TABLE import_lines;
