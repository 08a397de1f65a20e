package review

import (
	"context"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// trendFixture is actions created at known times, each failing some calls, and
// what the charts must say about them counted the plain way.
type trendFixture struct {
	pool    *pgxpool.Pool
	review  *Review
	clock   time.Time
	created map[string][]time.Time // per destination: actions' creation times
	failed  map[string][]time.Time // per destination: failed calls' finishing times
	waiting []time.Time            // pending and retrying actions: when they entered their state
	next    int
}

func newTrendFixture(t *testing.T) *trendFixture {
	t.Helper()
	pool := dbtest.New(t)
	cfg := &settings.Config{Destinations: []settings.Destination{{Name: "crm"}, {Name: "mail"}}}
	f := &trendFixture{pool: pool, clock: time.Date(2026, 11, 30, 15, 7, 31, 0, time.UTC),
		created: map[string][]time.Time{}, failed: map[string][]time.Time{}}
	f.review = New(pool, cfg, nil)
	f.review.now = func() time.Time { return f.clock }
	return f
}

// add creates an action of destination at created, with a failed call finishing
// `after` later when fails, and one successful call besides.
func (f *trendFixture) add(t *testing.T, destination string, created time.Time, fails bool, after time.Duration) {
	t.Helper()
	f.next++
	ctx := context.Background()
	var id int64
	if err := f.pool.QueryRow(ctx, `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, max_attempts, give_up_at, created_at, state_since)
VALUES ('acme', 'live', 's', 'n', 'enq_' || $1::int, '[]', 'op_' || $1::int, $2, '{}', '\x00', 'failed', 3,
    $3::timestamptz + interval '1 day', $3, $3)
RETURNING id`, f.next, destination, created).Scan(&id); err != nil {
		t.Fatal(err)
	}
	observed := []string{string(ledger.ObsSuccess)}
	if fails {
		observed = append(observed, string(ledger.ObsUnsure))
		f.failed[destination] = append(f.failed[destination], created.Add(after))
	}
	for _, o := range observed {
		if _, err := f.pool.Exec(ctx, `
INSERT INTO attempts (client, action_id, kind, operation_key, worker, status, observed, started_at, finished_at, part_day)
SELECT 'acme', $1, 'call', 'op', 'w', 'finished', $2, $3, $3, rows_day FROM actions WHERE client = 'acme' AND id = $1`, id, o, created.Add(after)); err != nil {
			t.Fatal(err)
		}
	}
	f.created[destination] = append(f.created[destination], created)
}

// addWaiting creates an action the workers have, in state since at.
func (f *trendFixture) addWaiting(t *testing.T, state string, at time.Time) {
	t.Helper()
	f.next++
	if _, err := f.pool.Exec(context.Background(), `
INSERT INTO actions (client, environment, source, name, business_key, key_parts, operation_key,
    destination, params, params_sha256, state, max_attempts, give_up_at, next_attempt_at, state_since)
VALUES ('acme', 'live', 's', 'n', 'enq_' || $1::int, '[]', 'op_' || $1::int, 'nowhere', '{}', '\x00', $2, 3,
    $3::timestamptz + interval '1 day', '9999-12-31', $3)`, f.next, state, at); err != nil {
		t.Fatal(err)
	}
	f.waiting = append(f.waiting, at)
}

// want counts the fixture's times into the window's buckets, the plain way.
func (f *trendFixture) want(name string) map[string][2][]int64 {
	var w TrendWindow
	for _, x := range TrendWindows {
		if x.Name == name {
			w = x
		}
	}
	since := f.clock.Truncate(w.Bucket).Add(w.Bucket - w.Span)
	out := map[string][2][]int64{}
	for _, d := range []string{"crm", "mail"} {
		counts := [2][]int64{make([]int64, w.Span/w.Bucket), make([]int64, w.Span/w.Bucket)}
		for i, times := range [][]time.Time{f.created[d], f.failed[d]} {
			for _, at := range times {
				if b := int(at.Sub(since) / w.Bucket); !at.Before(since) && b < len(counts[i]) {
					counts[i][b]++
				}
			}
		}
		out[d] = counts
	}
	// Every action is failed, in its state since it was created: the failed
	// queue's arrivals are all of them.
	arrived := make([]int64, w.Span/w.Bucket)
	for _, times := range f.created {
		for _, at := range times {
			if b := int(at.Sub(since) / w.Bucket); !at.Before(since) && b < len(arrived) {
				arrived[b]++
			}
		}
	}
	out["queue "+ledger.QueueFailed] = [2][]int64{arrived, nil}
	outstanding := make([]int64, w.Span/w.Bucket)
	for _, at := range f.waiting {
		if b := int(at.Sub(since) / w.Bucket); !at.Before(since) && b < len(outstanding) {
			outstanding[b]++
		}
	}
	out["queue "+ledger.QueueOutstanding] = [2][]int64{outstanding, nil}
	return out
}

func (f *trendFixture) got(t *testing.T, name string) map[string][2][]int64 {
	t.Helper()
	tr, err := f.review.Trends(context.Background(), name)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2][]int64{}
	for _, d := range tr.Destinations {
		out[d.Destination] = [2][]int64{d.New, d.Failed}
	}
	for _, q := range tr.Queues {
		if q.Queue == ledger.QueueFailed || q.Queue == ledger.QueueOutstanding {
			out["queue "+q.Queue] = [2][]int64{q.Arrived, nil}
		}
	}
	return out
}

func (f *trendFixture) check(t *testing.T, when string) {
	t.Helper()
	for _, w := range TrendWindows {
		if diff := cmp.Diff(f.want(w.Name), f.got(t, w.Name)); diff != "" {
			t.Errorf("%s, %s: [new, failed] per destination, and the failed queue's arrivals (-plain count +Trends):\n%s", when, w.Name, diff)
		}
	}
}

func (f *trendFixture) counted(t *testing.T) (rows int, sum int64, reach time.Time) {
	t.Helper()
	if err := f.pool.QueryRow(context.Background(), `SELECT c.rows, c.sum, h.counted_until
		FROM (SELECT count(*), coalesce(sum(n), 0) FROM trend_counts) c(rows, sum) CROSS JOIN trend_horizon h`).Scan(&rows, &sum, &reach); err != nil {
		t.Fatal(err)
	}
	return rows, sum, reach
}

// TestTrendsCountOnceAndRightAsTheClockMoves: the charts read trend_counts for the
// spans that are over and the tables for the rest, and say what a plain count of
// the tables says, before and after the counts reach further, as the clock moves
// and new actions arrive; no span is counted twice.
func TestTrendsCountOnceAndRightAsTheClockMoves(t *testing.T) {
	t.Parallel()
	f := newTrendFixture(t)
	rng := rand.New(rand.NewPCG(1, 2))
	// Eight days back (the week's oldest bucket and older), a spike in the last hour.
	for range 400 {
		age := time.Duration(rng.Int64N(int64(8 * 24 * time.Hour)))
		f.add(t, []string{"crm", "mail"}[rng.IntN(2)], f.clock.Add(-age), rng.IntN(3) == 0, time.Duration(rng.Int64N(int64(time.Minute))))
	}
	for i := range 30 {
		f.add(t, "crm", f.clock.Add(-time.Duration(i)*time.Minute), true, time.Second)
	}
	for i := range 40 {
		f.addWaiting(t, []string{ledger.StatePending, ledger.StateRetrying, ledger.StateProcessing}[i%3], f.clock.Add(-time.Duration(rng.Int64N(int64(9*24*time.Hour)))))
	}
	f.check(t, "first read")
	rows, sum, reach := f.counted(t)
	if want := f.clock.Add(-trendSettle).Truncate(trendGrain); !reach.Equal(want) || rows == 0 {
		t.Fatalf("after a first read the counts reach %s in %d rows, want %s", reach, rows, want)
	}
	f.check(t, "second read")
	if rows2, sum2, _ := f.counted(t); rows2 != rows || sum2 != sum {
		t.Errorf("a second read changed the counts: %d rows of %d, then %d of %d", rows, sum, rows2, sum2)
	}
	// New actions now, and the clock moves on past several spans and an hour.
	for _, step := range []time.Duration{2 * time.Minute, 4 * time.Minute, 11 * time.Minute, time.Hour, 26 * time.Hour} {
		for range 5 {
			f.add(t, "mail", f.clock.Add(-time.Duration(rng.Int64N(int64(time.Minute)))), true, 0)
		}
		f.clock = f.clock.Add(step)
		f.check(t, "after "+step.String())
	}
	// Nothing older than the week is kept.
	var old int
	if err := f.pool.QueryRow(context.Background(), `SELECT count(*) FROM trend_counts WHERE bucket < $1`,
		f.clock.Add(-7*24*time.Hour).Truncate(trendGrain)).Scan(&old); err != nil || old != 0 {
		t.Errorf("%d counts older than the week are kept (%v)", old, err)
	}
}

// TestTrendsCountedOnceUnderConcurrentReads: eight pages of trends opened at once
// on an uncounted history agree with a plain count, and the spans are counted
// once: trend_counts holds each action once.
func TestTrendsCountedOnceUnderConcurrentReads(t *testing.T) {
	t.Parallel()
	f := newTrendFixture(t)
	for i := range 300 {
		f.add(t, "crm", f.clock.Add(-time.Duration(i)*23*time.Minute), false, 0)
	}
	want := f.want("week")
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tr, err := f.review.Trends(context.Background(), "week")
			if err != nil {
				errs <- err.Error()
				return
			}
			if diff := cmp.Diff(want["crm"][0], tr.Destinations[0].New); diff != "" {
				errs <- diff
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Errorf("a concurrent read: %s", e)
	}
	_, sum, reach := f.counted(t)
	var before int64
	for _, at := range f.created["crm"] {
		if at.Before(reach) && !at.Before(f.clock.Add(-7*24*time.Hour).Truncate(trendGrain)) {
			before++
		}
	}
	if sum != before {
		t.Errorf("trend_counts holds %d actions, want the %d created before %s", sum, before, reach)
	}
}
