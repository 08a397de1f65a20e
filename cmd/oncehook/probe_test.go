package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	ready := true
	var paths []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths = append(paths, r.URL.Path)
		if !ready {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	t.Cleanup(srv.Close)
	probe := func(args ...string) error {
		var out bytes.Buffer
		port := srv.URL[strings.LastIndex(srv.URL, ":")+1:]
		env := &environment{stdout: &out, stderr: &out, getenv: func(k string) string {
			if k == "PORT" {
				return port
			}
			return ""
		}}
		return run(context.Background(), env, append([]string{"probe"}, args...))
	}
	if err := probe(); err != nil {
		t.Fatalf("probe on PORT's /readyz: %v", err)
	}
	if err := probe(srv.URL + "/healthz"); err != nil {
		t.Fatalf("probe of a URL: %v", err)
	}
	ready = false
	if err := probe(); err == nil || !strings.Contains(err.Error(), "503") {
		t.Fatalf("probe of a 503 = %v, want an error naming it", err)
	}
	srv.Close()
	if err := probe(); err == nil {
		t.Fatal("probe of a closed port succeeded")
	}
	if want := []string{"/readyz", "/healthz", "/readyz"}; strings.Join(paths, " ") != strings.Join(want, " ") {
		t.Errorf("paths = %v, want %v", paths, want)
	}
}
