package web

import (
	"crypto/subtle"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oncehook/oncehook"
)

// serveMetrics serves Prometheus metrics, behind a bearer token when one is configured.
func (s *Server) serveMetrics(c echo.Context) error {
	if s.metrics == nil {
		return oncehook.Errorf(oncehook.ENOTFOUND, "Metrics are not enabled.")
	}
	if s.metricsToken != "" {
		got := c.Request().Header.Get(echo.HeaderAuthorization)
		want := "Bearer " + s.metricsToken
		if subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			return oncehook.Errorf(oncehook.EUNAUTHORIZED, "Metrics need the bearer token set in ONCEHOOK_METRICS_TOKEN.")
		}
	}
	promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(c.Response(), c.Request())
	return nil
}
