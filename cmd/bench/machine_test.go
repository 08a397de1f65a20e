package main

import (
	"testing"
	"time"
)

// CPU per item is each party's CPU seconds over the items, a cluster's workers
// apart and together, whatever the length of the window.
func TestCPUPerItem(t *testing.T) {
	t0 := time.Now()
	a := cpuSample{at: t0, busy: 10, server: 1, postgres: 1, bench: 1, workers: []float64{1, 1}}
	b := cpuSample{at: t0.Add(4 * time.Second), busy: 18, server: 2, postgres: 3, bench: 1.5, workers: []float64{4, 2}}
	u := a.to(b)
	want := "oncehook 1000 µs, coordinator 2000 µs, worker 1 3000 µs, worker 2 1000 µs (workers together 4000 µs)"
	if got := u.perItem(1000); got != want {
		t.Errorf("perItem:\n got %s\nwant %s", got, want)
	}
	if got, want := u.String(), "oncehook 25%, coordinator 50%, worker 1 75%, worker 2 25%, load generator 12%, other work 12%"; got != want {
		t.Errorf("String:\n got %s\nwant %s", got, want)
	}
	single := cpuSample{at: t0, busy: 10, server: 1, postgres: 1}.to(cpuSample{at: t0.Add(2 * time.Second), busy: 12, server: 1.5, postgres: 2})
	if got, want := single.perItem(500), "oncehook 1000 µs, postgres 2000 µs"; got != want {
		t.Errorf("perItem on one server:\n got %s\nwant %s", got, want)
	}
}
