-- +goose Up
-- Room on each inbox page for the routed version of every row on it. Routing sets
-- each event's status (no indexed column, see 00007), a whole batch of events in
-- one statement, so the old versions are still live when the new ones are written
-- and none of that page's room is reclaimed meanwhile: with bodies out of the row
-- (00015) a row takes about 220 bytes, and a fifth of a page left free (00004) held
-- the new versions of about a quarter of its rows. The rest were written on other
-- pages, each with its five index entries (and a larger WAL record). With half of
-- each page left free every routed version fits beside its row, as do a repeat's
-- counts. Pages written before this keep their fill.
ALTER TABLE events SET (fillfactor = 50);

-- +goose Down
ALTER TABLE events SET (fillfactor = 80);
