package db

import (
	"testing"
	"time"
)

// TestEstimatesAreKeptForAWhile: an estimate is read once and given again until
// it is older than the time it is kept; a nil *Estimates reads every time.
func TestEstimatesAreKeptForAWhile(t *testing.T) {
	now := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	e := NewEstimates(30 * time.Second)
	e.now = func() time.Time { return now }
	reads := 0
	read := func() (int64, error) { reads++; return int64(1000 * reads), nil }
	get := func(e *Estimates, key [3]string) int64 {
		t.Helper()
		n, err := e.get(key, read)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	a := [3]string{"actions", "acme", "confirmed"}
	if n := get(e, a); n != 1000 {
		t.Fatalf("first estimate %d, want 1000", n)
	}
	now = now.Add(29 * time.Second)
	if n := get(e, a); n != 1000 || reads != 1 {
		t.Fatalf("29 s later: %d after %d reads, want the kept 1000 after 1", n, reads)
	}
	if n := get(e, [3]string{"actions", "globex", "confirmed"}); n != 2000 {
		t.Fatalf("another client's estimate %d, want a read of its own (2000)", n)
	}
	now = now.Add(time.Second)
	if n := get(e, a); n != 3000 {
		t.Fatalf("30 s later: %d, want a new read (3000)", n)
	}
	var none *Estimates
	get(none, a)
	get(none, a)
	if reads != 5 {
		t.Fatalf("%d reads, want 5: nil keeps nothing", reads)
	}
}
