-- +goose Up
-- Citus modifies no reference table that a foreign key ties to another in a
-- transaction that changed a distributed table over several connections ("cannot
-- modify table outages because there was a parallel operation on a distributed
-- table"), and the breaker's close releases the parked actions, a distributed
-- update, before it ends the outage. The alerts' tables keep their ids without
-- the keys: nothing deletes an outage but with its alerts.
ALTER TABLE alerts DROP CONSTRAINT alerts_outage_id_fkey;
ALTER TABLE alert_attempts DROP CONSTRAINT alert_attempts_alert_id_fkey;

-- +goose Down
ALTER TABLE alerts ADD FOREIGN KEY (outage_id) REFERENCES outages (id) ON DELETE CASCADE;
ALTER TABLE alert_attempts ADD FOREIGN KEY (alert_id) REFERENCES alerts (id) ON DELETE CASCADE;
