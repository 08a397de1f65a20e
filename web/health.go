package web

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/oncehook/oncehook/internal/ledger"
)

// healthz answers while the process is alive.
func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz answers 200 only while the database answers.
func (s *Server) readyz(c echo.Context) error {
	ctx, cancel := context.WithTimeout(c.Request().Context(), 2*time.Second)
	defer cancel()
	if err := s.pool.Ping(ctx); err != nil {
		return &ledger.Error{Code: ledger.EUNAVAILABLE, Message: "The database is not reachable.", Err: err}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}
