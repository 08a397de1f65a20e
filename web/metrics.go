package web

import (
	"crypto/subtle"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
)

// serveMetrics serves Prometheus metrics, behind a bearer token when one is configured.
func (s *Server) serveMetrics(c echo.Context) error {
	if s.metrics == nil {
		return ledger.Errorf(ledger.ENOTFOUND, "Metrics are not enabled.")
	}
	if !metricsAuthorized(c.Request(), s.metricsToken) {
		c.Response().Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
		return ledger.Errorf(ledger.EUNAUTHORIZED, "Metrics need the bearer token set in ONCEHOOK_METRICS_TOKEN.")
	}
	promhttp.HandlerFor(s.metrics.Registry, promhttp.HandlerOpts{}).ServeHTTP(c.Response(), c.Request())
	return nil
}

// MetricsHandler serves only /metrics, for processes without the web server
// (oncehook worker --metrics ADDR).
func MetricsHandler(m *metrics.Metrics, token string) http.Handler {
	prom := promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		if !metricsAuthorized(r, token) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="metrics"`)
			http.Error(w, "Metrics need the bearer token set in ONCEHOOK_METRICS_TOKEN.", http.StatusUnauthorized)
			return
		}
		prom.ServeHTTP(w, r)
	})
}

func metricsAuthorized(r *http.Request, token string) bool {
	if token == "" {
		return true
	}
	got := r.Header.Get("Authorization")
	return subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+token)) == 1
}
