-- +goose Up
-- A large delivery's body is kept out of its inbox row (TOAST), compressed with
-- lz4 where the server has it (PostgreSQL's default, pglz, otherwise).
--
-- Routing writes each event's status into a new version of its row, and a repeat
-- counts itself the same way (both in place, see 00004 and 00007). A row of more
-- than about 2 KB is compressed, and by default kept in the row if that brings it
-- under 2 KB: a 2 KB body took about 1.5 KB of the row, and every new version of
-- the row copied it and wrote it to the WAL again. With a target of 512 bytes the
-- compressed body moves out of the row, and a new version carries an 18-byte
-- pointer to it. (Rows under about 2 KB stay as they are: PostgreSQL only starts
-- on a row above that, whatever the target.) lz4 takes a fraction of pglz's CPU to
-- compress and read back (docs/performance.md has the measurements). Rows written
-- before keep their bodies.
-- +goose StatementBegin
DO $$
BEGIN
    ALTER TABLE events ALTER COLUMN body SET COMPRESSION lz4,
                       ALTER COLUMN payload SET COMPRESSION lz4;
EXCEPTION WHEN feature_not_supported THEN
    NULL; -- a server built without lz4: the default compression stays
END
$$;
-- +goose StatementEnd
ALTER TABLE events SET (toast_tuple_target = 512);

-- +goose Down
ALTER TABLE events RESET (toast_tuple_target);
ALTER TABLE events ALTER COLUMN body SET COMPRESSION default,
                   ALTER COLUMN payload SET COMPRESSION default;
