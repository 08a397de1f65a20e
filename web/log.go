package web

import (
	"time"

	"github.com/labstack/echo/v4"
)

// logRequests logs one line per request: never a body, a query string or a header
// value, since any of them may carry personal data or a secret.
func (s *Server) logRequests(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		s.logger.InfoContext(c.Request().Context(), "request",
			"request_id", c.Response().Header().Get(echo.HeaderXRequestID),
			"method", c.Request().Method, "route", c.Path(),
			"status", c.Response().Status, "duration_ms", time.Since(start).Milliseconds())
		return nil
	}
}
