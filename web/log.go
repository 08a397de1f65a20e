package web

import (
	"time"

	"github.com/labstack/echo/v4"
)

// logAttrsKey is where a handler leaves attributes for its request's log line, so
// one line per request says what happened (a delivery's source, event and outcome).
const logAttrsKey = "oncehook.log_attrs"

// logRequests logs one line per request: never a body, a query string or a header
// value, since any of them may carry personal data or a secret.
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		attrs := []any{"request_id", c.Response().Header().Get(echo.HeaderXRequestID),
			"method", c.Request().Method, "route", c.Path(),
			"status", c.Response().Status, "duration_ms", time.Since(start).Milliseconds()}
		if more, ok := c.Get(logAttrsKey).([]any); ok {
			attrs = append(attrs, more...)
		}
		s.logger.InfoContext(c.Request().Context(), "request", attrs...)
		return nil
	}
}
