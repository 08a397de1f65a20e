-- +goose Up
-- The file an action was imported from (oncehook import, docs/cutover.md): an
-- operation an earlier system performed, recorded confirmed without oncehook ever
-- calling the destination for it; '' for every action oncehook made itself. The
-- dashboard says so on the action's page and filters by it. A constant default
-- adds the column without rewriting the table.
ALTER TABLE actions ADD COLUMN imported_from text NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE actions DROP COLUMN imported_from;
