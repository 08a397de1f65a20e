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
-- Actions created from @start_at on, per destination and bucket of @bucket_seconds
-- counted from @since: what trend_counts does not hold yet.
SELECT destination,
       floor(extract(epoch FROM created_at - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       count(*)::bigint AS n
FROM actions
WHERE created_at >= @start_at::timestamptz
GROUP BY 1, 2;

-- name: DashboardTrendFailures :many
-- Calls that failed (observed one of @observed) from @start_at on, per destination and
-- bucket counted from @since.
SELECT a.destination,
       floor(extract(epoch FROM t.finished_at - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       count(*)::bigint AS n
FROM attempts t
JOIN actions a ON a.client = t.client AND a.id = t.action_id
WHERE t.finished_at >= @start_at::timestamptz AND t.kind = 'call' AND t.observed = ANY(@observed::text[])
GROUP BY 1, 2;

-- name: TrendHorizonLock :one
-- The trend counts' horizon, locked for the one process that counts on; no row
-- while another one does.
SELECT counted_until FROM trend_horizon FOR UPDATE SKIP LOCKED;

-- name: TrendHorizon :one
SELECT counted_until FROM trend_horizon;

-- name: TrendCountNew :exec
-- Counts the actions created in [@start_at, @until), both on five-minute boundaries.
INSERT INTO trend_counts (kind, destination, bucket, n)
SELECT 'new', destination, date_bin('5 minutes', created_at, timestamptz 'epoch'), count(*)
FROM actions
WHERE created_at >= @start_at::timestamptz AND created_at < @until::timestamptz
GROUP BY 2, 3
ON CONFLICT (kind, bucket, destination) DO UPDATE SET n = trend_counts.n + excluded.n;

-- name: TrendCountFailures :exec
-- Counts the calls that failed (observed one of @observed) in [@start_at, @until).
INSERT INTO trend_counts (kind, destination, bucket, n)
SELECT 'failed', a.destination, date_bin('5 minutes', t.finished_at, timestamptz 'epoch'), count(*)
FROM attempts t
JOIN actions a ON a.client = t.client AND a.id = t.action_id
WHERE t.finished_at >= @start_at::timestamptz AND t.finished_at < @until::timestamptz
  AND t.kind = 'call' AND t.observed = ANY(@observed::text[])
GROUP BY 2, 3
ON CONFLICT (kind, bucket, destination) DO UPDATE SET n = trend_counts.n + excluded.n;

-- name: TrendAdvance :exec
UPDATE trend_horizon SET counted_until = @counted_until;

-- name: TrendCounted :many
-- The counted buckets in [@since, @until), per kind and destination, as buckets of
-- @bucket_seconds counted from @since.
SELECT kind, destination,
       floor(extract(epoch FROM bucket - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       sum(n)::bigint AS n
FROM trend_counts
WHERE bucket >= @since::timestamptz AND bucket < @until::timestamptz
GROUP BY 1, 2, 3;

-- name: DashboardTrendQueues :many
-- Open actions that entered their state since @since, per state and bucket: what
-- arrived in each queue and still waits there.
SELECT state,
       floor(extract(epoch FROM state_since - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       count(*)::bigint AS n
FROM actions
WHERE state = ANY(@states::text[]) AND state_since >= @since::timestamptz
GROUP BY 1, 2;
