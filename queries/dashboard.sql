-- name: DashboardSourceStats :many
-- Per source: stored events, deliveries (repeats included), conflicts, last delivery.
SELECT source, count(*)::bigint AS events, coalesce(sum(deliveries), 0)::bigint AS deliveries,
       count(*) FILTER (WHERE conflict)::bigint AS conflicts,
       max(last_received_at)::timestamptz AS last_received_at
FROM events GROUP BY source;

-- name: DashboardQueueAges :many
-- Per open state: how many and since when the oldest has waited in it.
SELECT state, count(*)::bigint AS n, min(updated_at)::timestamptz AS oldest
FROM actions
WHERE state IN ('pending', 'processing', 'retrying', 'held', 'uncertain', 'failed')
GROUP BY state;

-- name: DashboardActionIDs :many
-- Every id matching a queue filter, newest first, for "all that match" bulk acts.
SELECT a.id FROM actions a
WHERE a.state = ANY(@states::text[])
  AND (@source::text = '' OR a.source = @source)
  AND (@name::text = '' OR a.name = @name)
  AND (@owner::text = '' OR a.owner = @owner)
  AND (@destination::text = '' OR a.destination = @destination)
  AND (@client::text = '' OR a.client = @client)
  AND (@q::text = '' OR a.business_key = @q OR a.operation_key = @q OR a.external_ref = @q
       OR a.business_key ILIKE '%' || @q || '%'
       OR EXISTS (SELECT 1 FROM action_events ae JOIN events e ON e.client = ae.client AND e.id = ae.event_id
                  WHERE ae.client = a.client AND ae.action_id = a.id AND e.source_event_id = @q))
ORDER BY a.id DESC
LIMIT @max_rows;
