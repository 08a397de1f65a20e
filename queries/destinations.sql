-- name: DestinationSetStatus :exec
INSERT INTO destinations (name, status, reason, changed_at) VALUES (@name, @status, @reason, now())
ON CONFLICT (name) DO UPDATE SET status = EXCLUDED.status, reason = EXCLUDED.reason, changed_at = EXCLUDED.changed_at;

-- name: DestinationList :many
SELECT d.name, d.status, d.reason, d.changed_at,
       (SELECT count(*) FROM actions a WHERE a.destination = d.name AND a.state = 'held')::bigint AS held
FROM destinations d ORDER BY d.name;
