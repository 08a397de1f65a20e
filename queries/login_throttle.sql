-- name: LoginThrottleFail :one
-- Counts one failure, starting a new window when the old one has passed.
INSERT INTO login_throttle (key, failures, window_start) VALUES (@key, 1, now())
ON CONFLICT (key) DO UPDATE
SET failures = CASE WHEN login_throttle.window_start > now() - make_interval(secs => @window_seconds::double precision)
                    THEN login_throttle.failures + 1 ELSE 1 END,
    window_start = CASE WHEN login_throttle.window_start > now() - make_interval(secs => @window_seconds::double precision)
                        THEN login_throttle.window_start ELSE now() END
RETURNING failures;

-- name: LoginThrottleClear :exec
DELETE FROM login_throttle WHERE key = @key;

-- name: LoginThrottleRefund :exec
-- A try that was counted up front and then succeeded gives its count back.
UPDATE login_throttle SET failures = greatest(failures - 1, 0) WHERE key = @key;
