-- name: DashboardSourceStats :many
-- Per source: stored events, deliveries (repeats included), conflicts, last delivery.
SELECT source, count(*)::bigint AS events, coalesce(sum(deliveries), 0)::bigint AS deliveries,
       count(*) FILTER (WHERE conflict)::bigint AS conflicts,
       max(last_received_at)::timestamptz AS last_received_at
FROM events GROUP BY source;

-- name: DashboardQueueAges :many
-- Per open state: how many and since when the oldest has waited in it (entered it).
SELECT state, count(*)::bigint AS n, min(state_since)::timestamptz AS oldest
FROM actions
WHERE state IN ('pending', 'processing', 'retrying', 'held', 'uncertain', 'failed')
GROUP BY state;
