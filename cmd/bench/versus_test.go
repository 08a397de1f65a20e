package main

import (
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/sandbox"
)

func TestEventSeq(t *testing.T) {
	for _, c := range []struct {
		id, prefix string
		want       int64
		ok         bool
	}{
		{"evt_ow_0", "evt_ow_", 0, true},
		{"evt_ow_41230", "evt_ow_", 41230, true},
		{"evt_pw_7", "evt_ow_", 0, false},
		{"evt_ow_", "evt_ow_", 0, false},
		{"evt_ow_12x", "evt_ow_", 0, false},
		{"evt_ow_-3", "evt_ow_", 0, false},
	} {
		got, ok := eventSeq(c.id, c.prefix)
		if got != c.want || ok != c.ok {
			t.Errorf("eventSeq(%q, %q) = %d, %v; want %d, %v", c.id, c.prefix, got, ok, c.want, c.ok)
		}
	}
}

// A business key held by two or by three records is one effect made more than
// once; records of another system's keys are not counted.
func TestDoubledKeys(t *testing.T) {
	rec := func(key string) sandbox.Record { return sandbox.Record{Fields: map[string]any{"enquiry_id": key}} }
	records := []sandbox.Record{rec("enq_vo1_1"), rec("enq_vo1_2"), rec("enq_vo1_1"), rec("enq_vp1_1"),
		rec("enq_vo2_3"), rec("enq_vo2_3"), rec("enq_vo2_3"), {Fields: map[string]any{}}}
	if n, doubled := doubledKeys(records, "enq_vo"); n != 6 || doubled != 2 {
		t.Fatalf("doubledKeys(vo) = %d records, %d doubled; want 6, 2", n, doubled)
	}
	if n, doubled := doubledKeys(records, "enq_vp"); n != 1 || doubled != 0 {
		t.Fatalf("doubledKeys(vp) = %d records, %d doubled; want 1, 0", n, doubled)
	}
}

func TestTimes(t *testing.T) {
	for _, c := range []struct {
		a, b float64
		want string
	}{{3000, 2000, "1.50x"}, {1, 4, "0.25x"}, {1, 0, "-"}} {
		if got := times(c.a, c.b); got != c.want {
			t.Errorf("times(%v, %v) = %q; want %q", c.a, c.b, got, c.want)
		}
	}
}

// The table takes the run other work slowed least: the higher sustained rate, the
// higher end to end rate.
func TestBestRuns(t *testing.T) {
	burst := func(acked int, routed time.Duration) burstResult {
		return burstResult{load: loadResult{acked: acked, window: 10 * time.Second}, routed: routed}
	}
	r := vsResult{warm: []burstResult{burst(40000, 0), burst(45000, 2*time.Second), burst(42000, 0)},
		e2e: []vsE2E{{n: 10000, elapsed: 5 * time.Second}, {n: 10000, elapsed: 4 * time.Second}}}
	if got := r.bestWarm().load.acked; got != 42000 { // 4,200/s beats 45,000 / 12 s = 3,750/s
		t.Errorf("bestWarm: %d acked; want 42000", got)
	}
	if got := r.bestE2E().elapsed; got != 4*time.Second {
		t.Errorf("bestE2E: %s; want 4s", got)
	}
}
