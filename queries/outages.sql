-- name: OutageContinue :one
-- The breaker of @destination opened: the outage still going on, or the last
-- one if it closed within the quiet time (flapping), goes on instead of a new
-- one beginning. No row: a new outage begins (OutageBegin).
UPDATE outages o SET closed_at = NULL, reopened = o.reopened + CASE WHEN o.closed_at IS NULL THEN 0 ELSE 1 END
WHERE o.id = (SELECT l.id FROM outages l WHERE l.destination = @destination
              ORDER BY l.id DESC LIMIT 1)
  AND (o.closed_at IS NULL OR o.closed_at > now() - make_interval(secs => @quiet_seconds::double precision))
RETURNING o.id;

-- name: OutageBegin :one
INSERT INTO outages (destination, reason, opened_by) VALUES (@destination, @reason, @opened_by)
RETURNING id;

-- name: OutageEnd :one
-- The breaker of @destination closed: its outage is over.
UPDATE outages SET closed_at = now() WHERE destination = @destination AND closed_at IS NULL
RETURNING id;

-- name: AlertsAdd :execrows
-- One alert of @kind for each of @channels, due @delay_seconds from now.
INSERT INTO alerts (outage_id, destination, channel, kind, due_at)
SELECT @outage_id, @destination, c.channel, @kind, now() + make_interval(secs => @delay_seconds::double precision)
FROM unnest(@channels::text[]) AS c(channel);

-- name: AlertsCancelRecovered :execrows
-- The outage goes on: its recovery, not announced yet, is not.
UPDATE alerts SET state = 'cancelled' WHERE outage_id = @outage_id AND kind = 'recovered' AND state = 'pending';

-- name: OutageList :many
-- The destination's latest outages, newest first.
SELECT id, destination, opened_at, closed_at, reopened, reason, opened_by FROM outages
WHERE destination = @destination ORDER BY id DESC LIMIT @max_rows;

-- name: AlertListOfOutages :many
-- The alerts of the outages named, oldest first.
SELECT id, outage_id, destination, channel, kind, state, due_at, created_at, sent_at FROM alerts
WHERE outage_id = ANY(@outage_ids::bigint[]) ORDER BY id;

-- name: AlertsDue :many
-- The alerts due to be sent, oldest first (alerts_due_idx).
SELECT id, channel FROM alerts WHERE state = 'pending' AND due_at <= now() ORDER BY due_at, id LIMIT @batch;

-- name: AlertTake :one
-- One sender takes a due alert: its due_at moves @lease_seconds on, so that no
-- other sends it meanwhile (a sender that dies leaves it due again then). The
-- others get no row.
UPDATE alerts a SET due_at = now() + make_interval(secs => @lease_seconds::double precision)
WHERE a.id = @id AND a.state = 'pending' AND a.due_at <= now()
RETURNING a.id, a.outage_id, a.destination, a.channel, a.kind, a.created_at;

-- name: AlertFacts :one
-- What an alert tells of its outage.
SELECT o.opened_at, o.closed_at, o.reason, o.reopened, o.opened_by,
       (SELECT count(*) FROM alert_attempts t WHERE t.alert_id = @alert_id)::integer AS tries
FROM outages o WHERE o.id = @outage_id;

-- name: AlertAttemptAdd :exec
INSERT INTO alert_attempts (alert_id, ok, http_status, error) VALUES (@alert_id, @ok, sqlc.narg(http_status), @error);

-- name: AlertSent :exec
UPDATE alerts SET state = 'sent', sent_at = now() WHERE id = @id AND state = 'pending';

-- name: AlertRetryIn :exec
-- The attempt failed: the alert is due again after @after_seconds, or is given
-- up (failed) when @give_up.
UPDATE alerts SET due_at = now() + make_interval(secs => @after_seconds::double precision),
                  state = CASE WHEN @give_up::boolean THEN 'failed' ELSE state END
WHERE id = @id AND state = 'pending';

-- name: AlertAttemptList :many
-- The attempts of the alerts named, oldest first.
SELECT id, alert_id, at, ok, http_status, error FROM alert_attempts
WHERE alert_id = ANY(@alert_ids::bigint[]) ORDER BY id;
