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
	starts := make([]time.Time, n)
	for i := range starts {
		starts[i] = since.Add(time.Duration(i) * w.Bucket)
	}
	arrived, err := q.DashboardTrendQueues(ctx, db.DashboardTrendQueuesParams{Starts: starts, BucketSeconds: secs})
	if err != nil {
		return out, fmt.Errorf("count queue arrivals: %w", err)
	}
	for _, row := range arrived {
		if t := byQueue[QueueOf(row.State)]; t != nil {
			put(t.Arrived, int32(row.StartAt.Sub(since)/w.Bucket), row.N)
		}
	}

	byDest := map[string]*DestinationTrend{}
	for _, d := range r.cfg.Destinations {
		out.Destinations = append(out.Destinations, DestinationTrend{Destination: d.Name, New: make([]int64, n), Failed: make([]int64, n)})
	}
	for i := range out.Destinations {
		byDest[out.Destinations[i].Destination] = &out.Destinations[i]
	}
	add := func(kind, destination string, bucket int32, v int64) {
		t := byDest[destination]
		switch {
		case t == nil:
		case kind == trendNew:
			put(t.New, bucket, v)
		case kind == trendFailed:
			put(t.Failed, bucket, v)
		}
	}
	// What is counted comes from trend_counts, the rest from the tables themselves.
	horizon, err := r.CountTrends(ctx)
	if err != nil {
		return out, err
	}
	counted, err := q.TrendCounted(ctx, db.TrendCountedParams{Since: since, Until: horizon, BucketSeconds: secs})
	if err != nil {
		return out, fmt.Errorf("read counted trends: %w", err)
	}
	for _, row := range counted {
		add(row.Kind, row.Destination, row.Bucket, row.N)
	}
	from := later(horizon, since)
	created, err := q.DashboardTrendNew(ctx, db.DashboardTrendNewParams{Since: since, StartAt: from, BucketSeconds: secs})
	if err != nil {
		return out, fmt.Errorf("count new actions: %w", err)
	}
	for _, row := range created {
		add(trendNew, row.Destination, row.Bucket, row.N)
	}
	failed, err := q.DashboardTrendFailures(ctx, db.DashboardTrendFailuresParams{Since: since, StartAt: from,
		BucketSeconds: secs, Observed: failedObservations})
	if err != nil {
		return out, fmt.Errorf("count failed calls: %w", err)
	}
	for _, row := range failed {
		add(trendFailed, row.Destination, row.Bucket, row.N)
	}
	return out, nil
}

// The kinds of trend_counts.
const (
	trendNew    = "new"    // actions created
	trendFailed = "failed" // calls that failed
)

// trendGrain is the span trend_counts counts in; every window's bucket is a
// multiple of it, and it divides a day.
const trendGrain = 5 * time.Minute

// trendSettle is how long after a span ends it is counted: by then every
// transaction that began before its end (and stamped a time inside it) is over.
const trendSettle = 5 * time.Minute

// CountTrends adds to trend_counts the spans of trendGrain that ended at least
// trendSettle ago and are not counted yet (at most the longest window back),
// forgets the counts older than that window, and returns how far the counts reach. One process counts at a time: another one
// returns the counts' reach as it is. A page of trends calls it, so the counts are
// current whether or not anything else does.
func (r *Review) CountTrends(ctx context.Context) (time.Time, error) {
	now := r.now()
	until := now.Add(-trendSettle).Truncate(trendGrain)
	oldest := now.Add(-TrendWindows[len(TrendWindows)-1].Span).Truncate(trendGrain)
	var horizon time.Time
	locked := false
	err := db.WithTx(ctx, r.pool, func(q *db.Queries) error {
		h, err := q.TrendHorizonLock(ctx)
		if db.IsNotFound(err) { // another process is counting
			return nil
		}
		if err != nil {
			return err
		}
		locked, horizon = true, h
		start := later(h, oldest)
		if !until.After(start) {
			return nil
		}
		if err := q.TrendCountNew(ctx, db.TrendCountNewParams{StartAt: start, Until: until}); err != nil {
			return err
		}
		if err := q.TrendCountFailures(ctx, db.TrendCountFailuresParams{StartAt: start, Until: until,
			Observed: failedObservations}); err != nil {
			return err
		}
		if err := q.TrendForget(ctx, oldest); err != nil {
			return err
		}
		horizon = until
		return q.TrendAdvance(ctx, until)
	})
	if err != nil {
		return time.Time{}, fmt.Errorf("count trends: %w", err)
	}
	if !locked {
		if horizon, err = db.New(r.pool).TrendHorizon(ctx); err != nil {
			return time.Time{}, fmt.Errorf("read the trends' reach: %w", err)
		}
	}
	return horizon, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
