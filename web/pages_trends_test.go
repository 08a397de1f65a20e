package web

import (
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/review"
)

// TestTrendChartSaysRecovered: failures that stopped read "recovered" once the
// newest bucket is a quarter through without one; failures in the newest
// bucket still read "getting worse".
func TestTrendChartSaysRecovered(t *testing.T) {
	t.Parallel()
	w := review.TrendWindow{Name: "hour", Span: time.Hour, Bucket: 5 * time.Minute}
	since := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tr := review.Trends{Window: w, Since: since}
	newest := since.Add(11 * w.Bucket)
	failed := make([]int64, 12)
	failed[10] = 6 // the bucket before the newest
	stopped := trendChart("c", "crm", tr, []series{{"new actions", "new", make([]int64, 12)}, {"failed calls", "failed", failed}},
		newest.Add(2*time.Minute))
	if stopped.Worse || !stopped.Recovered {
		t.Errorf("failures only before the newest bucket, 2 minutes into it: worse %v, recovered %v; want recovered",
			stopped.Worse, stopped.Recovered)
	}
	justBegun := trendChart("c", "crm", tr, []series{{"new actions", "new", make([]int64, 12)}, {"failed calls", "failed", failed}},
		newest.Add(10*time.Second))
	if justBegun.Recovered || !justBegun.Worse {
		t.Errorf("10 seconds into the newest bucket: worse %v, recovered %v; want still getting worse", justBegun.Worse, justBegun.Recovered)
	}
	failed[11] = 3
	ongoing := trendChart("c", "crm", tr, []series{{"new actions", "new", make([]int64, 12)}, {"failed calls", "failed", failed}},
		newest.Add(4*time.Minute))
	if ongoing.Recovered || !ongoing.Worse {
		t.Errorf("failures in the newest bucket: worse %v, recovered %v; want getting worse", ongoing.Worse, ongoing.Recovered)
	}
}
