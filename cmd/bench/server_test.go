package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	configs "github.com/oncehook/oncehook/internal/config"
)

// The cluster's config, one source and one action for each client, loads as
// oncehook loads it, and the senders post to those sources' paths.
func TestBenchConfigForClients(t *testing.T) {
	for _, clients := range [][]string{nil, {"shop1", "shop2", "shop3", "shop4"}} {
		path := filepath.Join(t.TempDir(), "bench.yaml")
		if err := os.WriteFile(path, []byte(benchConfig("127.0.0.1:1", "http://127.0.0.1:2", clients...)), 0o644); err != nil {
			t.Fatal(err)
		}
		cfg, err := configs.Load(path, func(k string) string { return benchEnv[k] })
		if err != nil {
			t.Fatalf("clients %v: %v", clients, err)
		}
		var got, want []string
		for _, s := range cfg.Sources {
			got = append(got, s.Client+" /hooks/"+s.Name)
		}
		for i, c := range clientsOrAcme(clients) {
			want = append(want, c+" "+hookPaths(clients)[i])
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("clients %v: sources (-want +got):\n%s", clients, d)
		}
		var sources []string
		for _, a := range cfg.Actions {
			sources = append(sources, "/hooks/"+a.Source)
		}
		if d := cmp.Diff(hookPaths(clients), sources); d != "" {
			t.Errorf("clients %v: an action for each source (-want +got):\n%s", clients, d)
		}
	}
}

// Sender i posts to the ith client's source, round and round.
func TestPosterSpreadsSendersOverClients(t *testing.T) {
	p := newPoster("http://127.0.0.1:1/base", 8).spread([]string{"a", "b", "c"})
	var got []string
	for i := range 4 {
		got = append(got, p.conn(i).path)
	}
	want := []string{"/base/hooks/stripe-a", "/base/hooks/stripe-b", "/base/hooks/stripe-c", "/base/hooks/stripe-a"}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("paths (-want +got):\n%s", d)
	}
	if got := newPoster("http://127.0.0.1:1", 8).conn(5).path; got != "/hooks/stripe-live" {
		t.Errorf("one client: path %s, want /hooks/stripe-live", got)
	}
}
