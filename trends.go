package oncehook

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
)

// TrendWindow is a span of time cut into equal buckets.
type TrendWindow struct {
	Name   string // "hour", "day", "week"
	Span   time.Duration
	Bucket time.Duration
}

// TrendWindows are the spans a person can look back over.
var TrendWindows = []TrendWindow{
	{Name: "hour", Span: time.Hour, Bucket: 5 * time.Minute},
	{Name: "day", Span: 24 * time.Hour, Bucket: time.Hour},
	{Name: "week", Span: 7 * 24 * time.Hour, Bucket: 24 * time.Hour},
}

// Trends says whether things are getting worse: per queue, the open actions that
// arrived in each bucket and still wait; per destination, the actions created and
// the calls that failed in each bucket. Counts run oldest bucket first.
type Trends struct {
	Window       TrendWindow
	Since        time.Time
	Queues       []QueueTrend
	Destinations []DestinationTrend
}

// QueueTrend is one queue's arrivals that still wait, per bucket.
type QueueTrend struct {
	Queue   string
	Arrived []int64
}

// DestinationTrend is one destination's new actions and failed calls, per bucket.
type DestinationTrend struct {
	Destination string
	New, Failed []int64
}

// failedObservations are the calls that count as failures in a trend.
var failedObservations = []string{string(ObsRejected), string(ObsUnauthorized), string(ObsThrottled), string(ObsUnsure)}

// Trends counts the window called name ("hour", "day" or "week"). EINVALID for
// another name.
func (r *Review) Trends(ctx context.Context, name string) (Trends, error) {
	var w TrendWindow
	for _, x := range TrendWindows {
		if x.Name == name {
			w = x
		}
	}
	if w.Name == "" {
		return Trends{}, Errorf(EINVALID, "Trends look back over an hour, a day or a week, not %q.", name)
	}
	n := int(w.Span / w.Bucket)
	// Buckets line up with the clock, so a refresh moves them on whole.
	since := r.now().Truncate(w.Bucket).Add(w.Bucket - w.Span)
	out := Trends{Window: w, Since: since}
	q := db.New(r.pool)
	secs := w.Bucket.Seconds()
	put := func(counts []int64, bucket int32, v int64) {
		if bucket >= 0 && int(bucket) < len(counts) {
			counts[bucket] += v
		}
	}

	byQueue := map[string]*QueueTrend{}
	for _, name := range Queues {
		out.Queues = append(out.Queues, QueueTrend{Queue: name, Arrived: make([]int64, n)})
	}
	for i := range out.Queues {
		byQueue[out.Queues[i].Queue] = &out.Queues[i]
	}
	arrived, err := q.DashboardTrendQueues(ctx, db.DashboardTrendQueuesParams{Since: since, BucketSeconds: secs, States: OpenStates()})
	if err != nil {
		return out, fmt.Errorf("count queue arrivals: %w", err)
	}
	for _, row := range arrived {
		if t := byQueue[QueueOf(row.State)]; t != nil {
			put(t.Arrived, row.Bucket, row.N)
		}
	}

	byDest := map[string]*DestinationTrend{}
	for _, d := range r.cfg.Destinations {
		out.Destinations = append(out.Destinations, DestinationTrend{Destination: d.Name, New: make([]int64, n), Failed: make([]int64, n)})
	}
	for i := range out.Destinations {
		byDest[out.Destinations[i].Destination] = &out.Destinations[i]
	}
	created, err := q.DashboardTrendNew(ctx, db.DashboardTrendNewParams{Since: since, BucketSeconds: secs})
	if err != nil {
		return out, fmt.Errorf("count new actions: %w", err)
	}
	for _, row := range created {
		if t := byDest[row.Destination]; t != nil {
			put(t.New, row.Bucket, row.N)
		}
	}
	failed, err := q.DashboardTrendFailures(ctx, db.DashboardTrendFailuresParams{Since: since, BucketSeconds: secs,
		Observed: failedObservations})
	if err != nil {
		return out, fmt.Errorf("count failed calls: %w", err)
	}
	for _, row := range failed {
		if t := byDest[row.Destination]; t != nil {
			put(t.Failed, row.Bucket, row.N)
		}
	}
	return out, nil
}
