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

-- name: DashboardTrendNew :many
-- Actions created since @since, per destination and bucket of @bucket_seconds.
SELECT destination,
       floor(extract(epoch FROM created_at - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       count(*)::bigint AS n
FROM actions
WHERE created_at >= @since::timestamptz
GROUP BY 1, 2;

-- name: DashboardTrendFailures :many
-- Calls that failed (observed one of @observed) since @since, per destination and bucket.
SELECT a.destination,
       floor(extract(epoch FROM t.finished_at - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       count(*)::bigint AS n
FROM attempts t
JOIN actions a ON a.client = t.client AND a.id = t.action_id
WHERE t.finished_at >= @since::timestamptz AND t.kind = 'call' AND t.observed = ANY(@observed::text[])
GROUP BY 1, 2;

-- name: DashboardTrendQueues :many
-- Open actions that entered their state since @since, per state and bucket: what
-- arrived in each queue and still waits there.
SELECT state,
       floor(extract(epoch FROM state_since - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       count(*)::bigint AS n
FROM actions
WHERE state = ANY(@states::text[]) AND state_since >= @since::timestamptz
GROUP BY 1, 2;
