-- name: MetricsOpenActions :many
-- Open actions only: the sets people work from stay small, so this stays cheap
-- however large the ledger grows.
SELECT state, count(*)::bigint AS n,
       coalesce(extract(epoch FROM now() - min(created_at)), 0)::double precision AS oldest_seconds
FROM actions
WHERE state IN ('pending', 'processing', 'retrying', 'held', 'uncertain', 'failed')
GROUP BY state;

-- name: MetricsHeldByDestination :many
SELECT destination, count(*)::bigint AS n FROM actions WHERE state = 'held' GROUP BY destination;
