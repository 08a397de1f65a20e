-- name: DashboardSourceStats :many
-- Per source of sources: its newest 1,001 stored events counted exactly along
-- events_source_idx (events, deliveries with repeats, conflicts, the last delivery
-- among them), so a million events cost what 1,000 do; a source with more is
-- estimated by SourceEstimates (or on Citus db.EstimateEvents). No row for a
-- source without events. (The range on one value keeps Postgres on the index's
-- order; see ActionList.) On Citus it runs for each client with its sources
-- (@client), routed to the client's shard.
SELECT s.source::text AS source, c.events::bigint AS events, c.deliveries::bigint AS deliveries,
       c.conflicts::bigint AS conflicts, c.last_received_at::timestamptz AS last_received_at
FROM unnest(@sources::text[]) AS s(source)
CROSS JOIN LATERAL (
    SELECT count(*) AS events, coalesce(sum(r.deliveries), 0) AS deliveries,
           count(*) FILTER (WHERE r.conflict) AS conflicts, max(r.last_received_at) AS last_received_at
    FROM (SELECT e.deliveries, e.conflict, e.last_received_at FROM events e
          WHERE e.source >= s.source AND e.source <= s.source
            AND (@client::text = '' OR e.client = @client)
          ORDER BY e.source, e.id DESC
          LIMIT 1001) r) c
WHERE c.events > 0;

-- name: DashboardSourceStatsOne :one
-- DashboardSourceStats of one source, for one Postgres: its newest 1,001 events
-- counted along events_source_idx. Planned per call with the source a constant,
-- Postgres takes its share of the events from the statistics and walks the
-- index to the limit; the source of an unnest() it cannot see, and past a
-- million events, with a guess of 0.5% of them, it read every event of the
-- source and sorted them (2.7 s at a million events over four sources).
SELECT count(*)::bigint AS events, coalesce(sum(r.deliveries), 0)::bigint AS deliveries,
       count(*) FILTER (WHERE r.conflict)::bigint AS conflicts,
       coalesce(max(r.last_received_at), 'epoch')::timestamptz AS last_received_at -- (epoch: no events)
FROM (SELECT e.deliveries, e.conflict, e.last_received_at FROM events e
      WHERE e.source = @source
      ORDER BY e.source, e.id DESC
      LIMIT 1001) r;

-- name: SourceEstimates :many
-- The planner's count of the events of each of sources (autovacuum's ANALYZE
-- keeps it), for the sources DashboardSourceStats found more than 1,000 of.
SELECT s.source::text AS source,
       coalesce((t.reltuples * st.most_common_freqs[array_position(st.most_common_vals::text::text[], s.source)])::bigint,
                0)::bigint AS estimated
FROM unnest(@sources::text[]) AS s(source)
LEFT JOIN pg_catalog.pg_class t ON t.oid = 'events'::regclass
LEFT JOIN pg_catalog.pg_stats st ON st.schemaname = current_schema() AND st.tablename = t.relname AND st.attname = 'source';

-- name: DashboardTrendNew :many
-- Actions created from @start_at on, per destination and bucket of @bucket_seconds
-- counted from @since: what trend_counts does not hold yet.
SELECT destination,
       floor(extract(epoch FROM created_at - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       count(*)::bigint AS n
FROM actions
WHERE created_at >= @start_at::timestamptz
  AND (@all_clients::boolean OR client = ANY(@scope_clients::text[]))
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
  AND (@all_clients::boolean OR t.client = ANY(@scope_clients::text[]))
GROUP BY 1, 2;

-- name: TrendHorizonLock :one
-- The trend counts' horizon, locked for the one process that counts on; no row
-- while another one does.
SELECT counted_until FROM trend_horizon FOR UPDATE SKIP LOCKED;

-- name: TrendHorizon :one
SELECT counted_until FROM trend_horizon;

-- name: TrendCountNew :exec
-- Counts the actions created in [@start_at, @until), both on five-minute boundaries.
INSERT INTO trend_counts (kind, client, destination, bucket, n)
SELECT 'new', client, destination, date_bin('5 minutes', created_at, timestamptz 'epoch'), count(*)
FROM actions
WHERE created_at >= @start_at::timestamptz AND created_at < @until::timestamptz
GROUP BY 2, 3, 4
ON CONFLICT (kind, bucket, client, destination) DO UPDATE SET n = trend_counts.n + excluded.n;

-- name: TrendCountFailures :exec
-- Counts the calls that failed (observed one of @observed) in [@start_at, @until).
INSERT INTO trend_counts (kind, client, destination, bucket, n)
SELECT 'failed', a.client, a.destination, date_bin('5 minutes', t.finished_at, timestamptz 'epoch'), count(*)
FROM attempts t
JOIN actions a ON a.client = t.client AND a.id = t.action_id
WHERE t.finished_at >= @start_at::timestamptz AND t.finished_at < @until::timestamptz
  AND t.kind = 'call' AND t.observed = ANY(@observed::text[])
GROUP BY 2, 3, 4
ON CONFLICT (kind, bucket, client, destination) DO UPDATE SET n = trend_counts.n + excluded.n;

-- name: TrendAdvance :exec
UPDATE trend_horizon SET counted_until = @counted_until;

-- name: TrendForget :exec
-- Counts older than the longest window are never shown again.
DELETE FROM trend_counts WHERE bucket < @before::timestamptz;

-- name: TrendCounted :many
-- The counted buckets in [@since, @until), per kind and destination, as buckets of
-- @bucket_seconds counted from @since.
SELECT kind, destination,
       floor(extract(epoch FROM bucket - @since::timestamptz) / @bucket_seconds::double precision)::integer AS bucket,
       sum(n)::bigint AS n
FROM trend_counts
WHERE bucket >= @since::timestamptz AND bucket < @until::timestamptz
  AND (@all_clients::boolean OR client = ANY(@scope_clients::text[]))
GROUP BY 1, 2, 3;

-- name: DashboardTrendQueues :many
-- Open actions that entered their state in each bucket (from each of starts, for
-- bucket_seconds) and still wait there, per state. For the states that wait for a
-- person, a count along actions_waiting_idx per state and bucket, reading no row;
-- the workers' states (few and brief) are read and grouped. On Citus it runs for
-- each client, its scope that one client, routed to the client's shard.
SELECT s.state::text AS state, b.start_at::timestamptz AS start_at, c.n::bigint AS n
FROM unnest(ARRAY['held', 'uncertain', 'failed']) AS s(state)
CROSS JOIN unnest(@starts::timestamptz[]) AS b(start_at)
CROSS JOIN LATERAL (
    SELECT count(*) AS n FROM actions a
    WHERE a.state = s.state AND a.state IN ('held', 'uncertain', 'failed')
      AND (@all_clients::boolean OR a.client = ANY(@scope_clients::text[]))
      AND a.state_since >= b.start_at
      AND a.state_since < b.start_at + make_interval(secs => @bucket_seconds::double precision)) c
WHERE c.n > 0
UNION ALL
SELECT a.state::text AS state, b.start_at::timestamptz AS start_at, count(*)::bigint AS n
FROM unnest(@starts::timestamptz[]) AS b(start_at)
JOIN actions a ON a.state IN ('pending', 'processing', 'retrying')
    AND (@all_clients::boolean OR a.client = ANY(@scope_clients::text[]))
    AND a.state_since >= b.start_at
    AND a.state_since < b.start_at + make_interval(secs => @bucket_seconds::double precision)
GROUP BY 1, 2;

-- name: DashboardCauses :many
-- The open actions grouped by state, destination and the start of their reason
-- (which decides their cause, see causeOf), with, for a pending action, whether
-- it waits for its predecessor: the queues' counts and the overview's causes, in
-- one read per page, of the clients in the reader's scope. The actions that wait
-- for a person are counted from actions_cause_idx alone (reason_start is their
-- reason's first @reason_bytes bytes, see migration 00030; the index includes the
-- client); the workers' states are few and brief, read whole.
-- (Grouped by the columns themselves, in the index's order, so the counts stream
-- along it; null is a reason_start the code reads as "". With @split, when
-- some client with actions stored is no longer in @configured, unconfigured
-- counts those clients' actions, a cause of their own that
-- DashboardCausesUnconfigured then names; without it nothing is compared.)
SELECT state, destination, reason_start, false AS blocked,
       count(*)::bigint AS n, min(state_since)::timestamptz AS oldest,
       count(*) FILTER (WHERE @split::boolean AND client <> ALL(@configured::text[]))::bigint AS unconfigured,
       -- (the group's oldest when none is configured: it is then all unconfigured's)
       coalesce(min(state_since) FILTER (WHERE NOT @split OR client = ANY(@configured::text[])), min(state_since))::timestamptz
           AS oldest_configured
FROM actions
WHERE state IN ('held', 'uncertain', 'failed')
  AND (@all_clients::boolean OR client = ANY(@scope_clients::text[]))
GROUP BY state, destination, reason_start
UNION ALL
SELECT state, destination, left(reason, @reason_bytes::integer)::text,
       (state = 'pending' AND after_id IS NOT NULL
        AND next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz)::boolean,
       count(*)::bigint, min(state_since)::timestamptz, 0::bigint, min(state_since)::timestamptz
FROM actions
WHERE state IN ('pending', 'processing', 'retrying')
  AND (@all_clients::boolean OR client = ANY(@scope_clients::text[]))
GROUP BY 1, 2, 3, 4;

-- name: DashboardCausesCapped :many
-- DashboardCauses on one Postgres without reading every waiting action: the
-- groups (state, destination, reason_start) of the actions that wait for a
-- person are found by a loose index scan of actions_cause_idx (one probe a
-- group), and each is counted along it up to @counted actions of the reader's
-- scope; capped says it may have more, and its count is then estimated by the caller
-- from state_estimate (the planner's count of the state, as ActionCountByState)
-- and weight (the share of actions whose reason starts so, from the planner's
-- statistics of reason_start). oldest is the oldest of the rows counted;
-- state_oldest the state's oldest in scope, read at the head of
-- actions_waiting_idx. The workers' states are read whole, as DashboardCauses.
WITH RECURSIVE g AS (
    (SELECT a.state, a.destination, a.reason_start FROM actions a
     WHERE a.state IN ('held', 'uncertain', 'failed')
     ORDER BY a.state, a.destination, a.reason_start LIMIT 1)
    UNION ALL
    SELECT n.state, n.destination, n.reason_start FROM g CROSS JOIN LATERAL (
        SELECT a.state, a.destination, a.reason_start FROM actions a
        WHERE a.state IN ('held', 'uncertain', 'failed')
          AND (a.state, a.destination, a.reason_start) > (g.state, g.destination, g.reason_start)
        ORDER BY a.state, a.destination, a.reason_start LIMIT 1) n
)
SELECT g.state::text AS state, g.destination::text AS destination, g.reason_start::text AS reason_start,
       false AS blocked, c.n::bigint AS n, c.oldest::timestamptz AS oldest,
       c.unconfigured::bigint AS unconfigured, c.oldest_configured::timestamptz AS oldest_configured,
       (c.n >= @counted::bigint)::boolean AS capped,
       coalesce((SELECT st.most_common_freqs[array_position(st.most_common_vals::text::text[], g.reason_start)]
                 FROM pg_catalog.pg_stats st
                 WHERE st.schemaname = current_schema() AND st.tablename = 'actions' AND st.attname = 'reason_start'),
                0)::float8 AS weight,
       coalesce((SELECT (t.reltuples * st.most_common_freqs[array_position(st.most_common_vals::text::text[], g.state)])::bigint
                 FROM pg_catalog.pg_class t
                 JOIN pg_catalog.pg_stats st ON st.schemaname = current_schema() AND st.tablename = t.relname AND st.attname = 'state'
                 WHERE t.oid = 'actions'::regclass), 0)::bigint AS state_estimate,
       (SELECT w.state_since FROM actions w
        WHERE w.state IN ('held', 'uncertain', 'failed') AND w.state >= g.state AND w.state <= g.state
          AND (@all_clients::boolean OR w.client = ANY(@scope_clients::text[]))
        ORDER BY w.state, w.state_since, w.id LIMIT 1)::timestamptz AS state_oldest
FROM g CROSS JOIN LATERAL (
    SELECT count(*) AS n, min(r.state_since) AS oldest,
           count(*) FILTER (WHERE @split::boolean AND r.client <> ALL(@configured::text[])) AS unconfigured,
           coalesce(min(r.state_since) FILTER (WHERE NOT @split OR r.client = ANY(@configured::text[])), min(r.state_since))
               AS oldest_configured
    FROM (SELECT a.client, a.state_since FROM actions a
          WHERE a.state IN ('held', 'uncertain', 'failed')
            AND a.state = g.state AND a.destination = g.destination AND a.reason_start = g.reason_start
            AND (@all_clients::boolean OR a.client = ANY(@scope_clients::text[]))
          LIMIT @counted::bigint) r) c
WHERE c.n > 0
UNION ALL
SELECT state, destination, left(reason, @reason_bytes::integer)::text,
       (state = 'pending' AND after_id IS NOT NULL
        AND next_attempt_at = '9999-12-31 00:00:00+00'::timestamptz)::boolean,
       count(*)::bigint, min(state_since)::timestamptz, 0::bigint, min(state_since)::timestamptz,
       false, 0::float8, 0::bigint, min(state_since)::timestamptz
FROM actions
WHERE state IN ('pending', 'processing', 'retrying')
  AND (@all_clients::boolean OR client = ANY(@scope_clients::text[]))
GROUP BY 1, 2, 3, 4;

-- name: DashboardCausesUnconfigured :many
-- The actions that wait for a person of clients no longer in @configured, by
-- client, state and destination: read only when DashboardCauses counted some.
SELECT client, state, destination, count(*)::bigint AS n, min(state_since)::timestamptz AS oldest
FROM actions
WHERE state IN ('held', 'failed') AND client <> ALL(@configured::text[])
  AND (@all_clients::boolean OR client = ANY(@scope_clients::text[]))
GROUP BY client, state, destination;
