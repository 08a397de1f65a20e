-- name: NotifyCandidates :many
-- Actions that need a person and whose current state has not been reported yet,
-- but those a person snoozed until after @now.
SELECT a.* FROM actions a
WHERE (a.state IN ('failed', 'held')
       OR (a.state = 'uncertain' AND a.updated_at < @uncertain_before::timestamptz))
  AND NOT EXISTS (SELECT 1 FROM notifications n
                  WHERE n.client = a.client AND n.action_id = a.id AND n.state = a.state
                    AND n.status <> 'failed')
  AND NOT EXISTS (SELECT 1 FROM snoozes z
                  WHERE z.client = a.client AND z.action_id = a.id AND z.until > @now::timestamptz)
ORDER BY a.id
LIMIT 1000;

-- name: OwnerDigestClaim :one
-- Takes this owner's digest slot unless one went out within the interval.
INSERT INTO owner_digests (owner, last_sent_at) VALUES (@owner, @now)
ON CONFLICT (owner) DO UPDATE SET last_sent_at = EXCLUDED.last_sent_at
WHERE owner_digests.last_sent_at <= @not_after::timestamptz
RETURNING owner;

-- name: NotificationClaim :one
-- Claims one (action, state) for a digest; a row another process claimed first, or
-- one already sent, comes back empty.
INSERT INTO notifications (client, action_id, state, owner, status, at)
VALUES (@client, @action_id, @state, @owner, 'claimed', @now)
ON CONFLICT (client, action_id, state) DO UPDATE
SET status = 'claimed', owner = EXCLUDED.owner, at = EXCLUDED.at
WHERE notifications.status = 'failed'
RETURNING action_id;

-- name: NotificationSetStatus :exec
UPDATE notifications SET status = @status
WHERE client = @client AND action_id = @action_id AND state = @state;

-- name: NotificationForget :exec
-- Forgets that an action's state was reported: a snoozed action is reported
-- again once it wakes.
DELETE FROM notifications WHERE client = @client AND action_id = @action_id AND state = @state;
