-- +goose Up
-- The queues are served by indexes that already exist: claims walk the partial
-- indexes of received events and due actions, the queue pages and the API walk
-- actions_state_idx (state, id DESC) or actions_owner_idx one state at a time
-- (queries/actions.sql, ActionList and ActionCountByState), so a page costs the same
-- with a thousand actions or a million and nothing counts a large table.
--
-- What changes here is room on each inbox page for a row's next version. A repeat
-- delivery only counts itself on its event (deliveries, last_received_at, no indexed
-- column), so when the new version fits on the same page it is a HOT update and
-- writes none of the inbox's six index entries. An event with a 2 KB body takes about
-- 1.5 KB on the page (the body is compressed); a fifth of the page left free holds
-- one more version (docs/performance.md has the measurements). Pages written before
-- this keep their fill.
ALTER TABLE events SET (fillfactor = 80);

-- +goose Down
ALTER TABLE events RESET (fillfactor);
