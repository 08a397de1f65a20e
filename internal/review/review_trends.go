package review

import (
	"context"
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
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
var failedObservations = []string{string(ledger.ObsRejected), string(ledger.ObsUnauthorized), string(ledger.ObsThrottled), string(ledger.ObsUnsure)}

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
		return Trends{}, ledger.Errorf(ledger.EINVALID, "Trends look back over an hour, a day or a week, not %q.", name)
	}
	// Buckets line up with the clock, so a refresh moves them on whole.
	since := r.now().Truncate(w.Bucket).Add(w.Bucket - w.Span)
	out := Trends{Window: w, Since: since}
	var err error
	if out.Queues, err = r.queueTrends(ctx, w, since); err != nil {
		return out, err
	}
	out.Destinations, err = r.destinationTrends(ctx, w, since)
	return out, err
}

// addTo adds v to counts[bucket], when the bucket is in the window.
func addTo(counts []int64, bucket int32, v int64) {
	if bucket >= 0 && int(bucket) < len(counts) {
		counts[bucket] += v
	}
}

// queueTrends counts each queue's open actions by the bucket they entered their
// state in.
func (r *Review) queueTrends(ctx context.Context, w TrendWindow, since time.Time) ([]QueueTrend, error) {
	n := int(w.Span / w.Bucket)
	out := make([]QueueTrend, len(ledger.Queues))
	byQueue := map[string]*QueueTrend{}
	for i, name := range ledger.Queues {
		out[i] = QueueTrend{Queue: name, Arrived: make([]int64, n)}
		byQueue[name] = &out[i]
	}
	starts := make([]time.Time, n)
	for i := range starts {
		starts[i] = since.Add(time.Duration(i) * w.Bucket)
	}
	sc, err := r.readScope(ctx)
	if err != nil {
		return out, err
	}
	arrived, err := r.store.TrendQueues(ctx, r.pool, db.DashboardTrendQueuesParams{Starts: starts,
		BucketSeconds: w.Bucket.Seconds(), AllClients: sc.All, ScopeClients: sc.Clients}, r.readClients)
	if err != nil {
		return out, fmt.Errorf("count queue arrivals: %w", err)
	}
	for _, row := range arrived {
		if t := byQueue[ledger.QueueOf(row.State)]; t != nil {
			addTo(t.Arrived, int32(row.StartAt.Sub(since)/w.Bucket), row.N)
		}
	}
	return out, nil
}

// destinationTrends counts each destination's new actions and failed calls per
// bucket: what trend_counts holds from there, the rest from the tables themselves.
func (r *Review) destinationTrends(ctx context.Context, w TrendWindow, since time.Time) ([]DestinationTrend, error) {
	n := int(w.Span / w.Bucket)
	out := make([]DestinationTrend, 0, len(r.cfg.Destinations))
	for _, d := range r.cfg.Destinations {
		if r.seesDestination(d.Name) {
			out = append(out, DestinationTrend{Destination: d.Name, New: make([]int64, n), Failed: make([]int64, n)})
		}
	}
	byDest := map[string]*DestinationTrend{}
	for i := range out {
		byDest[out[i].Destination] = &out[i]
	}
	add := func(kind, destination string, bucket int32, v int64) {
		t := byDest[destination]
		switch {
		case t == nil:
		case kind == trendNew:
			addTo(t.New, bucket, v)
		case kind == trendFailed:
			addTo(t.Failed, bucket, v)
		}
	}
	horizon, err := r.CountTrends(ctx)
	if err != nil {
		return out, err
	}
	sc, err := r.readScope(ctx)
	if err != nil {
		return out, err
	}
	q, secs := db.New(r.pool), w.Bucket.Seconds()
	counted, err := q.TrendCounted(ctx, db.TrendCountedParams{Since: since, Until: horizon, BucketSeconds: secs,
		AllClients: sc.All, ScopeClients: sc.Clients})
	if err != nil {
		return out, fmt.Errorf("read counted trends: %w", err)
	}
	for _, row := range counted {
		add(row.Kind, row.Destination, row.Bucket, row.N)
	}
	from := later(horizon, since)
	created, err := q.DashboardTrendNew(ctx, db.DashboardTrendNewParams{Since: since, StartAt: from, BucketSeconds: secs,
		AllClients: sc.All, ScopeClients: sc.Clients})
	if err != nil {
		return out, fmt.Errorf("count new actions: %w", err)
	}
	for _, row := range created {
		add(trendNew, row.Destination, row.Bucket, row.N)
	}
	failed, err := q.DashboardTrendFailures(ctx, db.DashboardTrendFailuresParams{Since: since, StartAt: from,
		BucketSeconds: secs, Observed: failedObservations, AllClients: sc.All, ScopeClients: sc.Clients})
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
	// Most pages find the counts current: they read the reach, and lock nothing
	// (on Citus trend_horizon is on every node, and a lock is taken on each).
	horizon, err := db.New(r.pool).TrendHorizon(ctx)
	if err != nil {
		return time.Time{}, fmt.Errorf("read the trends' reach: %w", err)
	}
	if !until.After(later(horizon, oldest)) {
		return horizon, nil
	}
	err = db.WithTx(ctx, r.pool, func(q *db.Queries) error {
		h, err := q.TrendHorizonLock(ctx)
		if db.IsNotFound(err) { // another process is counting
			return nil
		}
		if err != nil {
			return err
		}
		horizon = h
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
	// When another process held the lock, the reach read before it is
	// returned, and the caller counts live from there. Read again, it could be
	// the other's new reach while its counts are not yet visible: on Citus a
	// transaction's commit reaches the nodes one by one, and a reader saw the
	// new reach on one and no counts on the others (a week of trends read as
	// zeros under CI's load, TestTrendsCountedOnceUnderConcurrentReads).
	return horizon, nil
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
