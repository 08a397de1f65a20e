package web

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// WorkerHandler serves a worker process's /healthz and /readyz, with the same
// answers as the server's, and hands every other path to next (MetricsHandler), so
// orchestrators probe workers the way they probe servers.
func WorkerHandler(pool *pgxpool.Pool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/healthz":
			writeStatus(w, http.StatusOK, "ok")
		case "/readyz":
			ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
			defer cancel()
			if err := pool.Ping(ctx); err != nil {
				writeStatus(w, http.StatusServiceUnavailable, "The database is not reachable.")
				return
			}
			writeStatus(w, http.StatusOK, "ready")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func writeStatus(w http.ResponseWriter, code int, status string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"status": status})
}
