-- name: LoginThrottleGet :one
-- Failures still inside the window; a window that has passed counts as none.
SELECT CASE WHEN window_start > now() - make_interval(secs => @window_seconds::double precision)
            THEN failures ELSE 0 END::integer AS failures
FROM login_throttle WHERE key = @key;

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
