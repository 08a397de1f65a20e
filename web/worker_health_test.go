package web_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/web"
)

func TestWorkerHandlerProbes(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	srv := httptest.NewServer(web.WorkerHandler(pool, web.MetricsHandler(metrics.New(pool), "")))
	t.Cleanup(srv.Close)
	get := func(path string) (int, string) {
		t.Helper()
		res, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	status := func(body string) string {
		var v struct{ Status string }
		_ = json.Unmarshal([]byte(body), &v)
		return v.Status
	}
	if code, body := get("/healthz"); code != 200 || status(body) != "ok" {
		t.Errorf("healthz = %d %q, want 200 ok", code, body)
	}
	if code, body := get("/readyz"); code != 200 || status(body) != "ready" {
		t.Errorf("readyz = %d %q, want 200 ready", code, body)
	}
	if code, body := get("/metrics"); code != 200 || !strings.Contains(body, "oncehook_") {
		t.Errorf("metrics = %d, want 200 with oncehook's metrics", code)
	}
	if code, _ := get("/other"); code != 404 {
		t.Errorf("other path = %d, want 404", code)
	}
	pool.Close() // the database is gone for this process
	if code, body := get("/readyz"); code != 503 || !strings.Contains(body, "not reachable") {
		t.Errorf("readyz with no database = %d %q, want 503", code, body)
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("healthz with no database = %d, want 200 (the process is alive)", code)
	}
}
