-- name: BreakerTransitionInsert :exec
INSERT INTO breaker_transitions (destination, from_state, to_state, reason, actor)
VALUES (@destination, @from_state, @to_state, @reason, @actor);

-- name: BreakerTransitionList :many
-- A destination's latest changes, newest first.
SELECT id, destination, at, from_state, to_state, reason, actor
FROM breaker_transitions WHERE destination = @destination ORDER BY id DESC LIMIT @max_rows;
