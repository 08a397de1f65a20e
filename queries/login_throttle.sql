-- name: LoginThrottleFail :one
-- Counts one failure, starting a new window when the old one has passed. The
-- update reads the time from the row it would have inserted (EXCLUDED), with
-- immutable functions only, as Citus requires of an upsert's SET.
INSERT INTO login_throttle (key, failures, window_start) VALUES (@key, 1, now())
ON CONFLICT (key) DO UPDATE
SET failures = CASE WHEN EXCLUDED.window_start - login_throttle.window_start < make_interval(secs => @window_seconds::double precision)
                    THEN login_throttle.failures + 1 ELSE 1 END,
    window_start = CASE WHEN EXCLUDED.window_start - login_throttle.window_start < make_interval(secs => @window_seconds::double precision)
                        THEN login_throttle.window_start ELSE EXCLUDED.window_start END
RETURNING failures;

-- name: LoginThrottleClear :exec
DELETE FROM login_throttle WHERE key = @key;

-- name: LoginThrottleRefund :exec
-- A try that was counted up front and then succeeded gives its count back.
UPDATE login_throttle SET failures = greatest(failures - 1, 0) WHERE key = @key;
