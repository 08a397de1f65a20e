-- +goose Up
-- The queues are served by indexes that already exist: claims walk the partial
-- indexes of received events and due actions, the queue pages and the API walk
-- actions_state_idx (state, id DESC) or actions_owner_idx one state at a time
-- (queries/actions.sql, ActionList and ActionCountByState), so a page costs the same
-- with a thousand actions or a million and nothing counts a large table.
--
-- What changes here is room on each page for a row's next version: an update that
-- changes no indexed column (a repeat delivery counted on its event, an attempt
-- counted on its action) then stays on the page as a HOT update and writes no index
-- entries. Tables are rewritten lazily: new pages get the room.
ALTER TABLE events SET (fillfactor = 90);
ALTER TABLE actions SET (fillfactor = 90);

-- +goose Down
ALTER TABLE actions RESET (fillfactor);
ALTER TABLE events RESET (fillfactor);
