-- +goose Up
-- Retention drops the daily partitions wholly past their window (see
-- internal/retention and docs/operations.md). Before it drops a day of attempts
-- and audit, it carries forward the rows of every action still kept whose
-- rows_day is that day: this index finds them.
-- (On a Citus cluster distributed before, over one connection per node: see 00039.)
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
CREATE INDEX actions_rows_day_idx ON actions (rows_day);

-- oncehook_partitions_past lists the daily partitions of parent whose day ends on
-- or before before (wholly past a window), oldest first, with whether a detach
-- of it was begun and not finished (a DETACH ... CONCURRENTLY interrupted).
-- +goose StatementBegin
CREATE FUNCTION oncehook_partitions_past(parent text, before date)
RETURNS TABLE (name text, day date, detach_pending boolean) LANGUAGE sql STABLE AS $$
    SELECT c.relname::text, to_date(right(c.relname, 8), 'YYYYMMDD'), i.inhdetachpending
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = parent::regclass AND c.relname ~ '_[0-9]{8}$'
      AND to_date(right(c.relname, 8), 'YYYYMMDD') + 1 <= before
    ORDER BY 2
$$;
-- +goose StatementEnd

-- +goose Down
DROP FUNCTION oncehook_partitions_past(text, date);
DROP INDEX actions_rows_day_idx;
