package ledger_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

// TestBreakerHealth: only what says the destination itself is unwell counts
// against it; a 4xx about one request, a credentials refusal and an SMTP
// rejection of one message do not.
func TestBreakerHealth(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		typ  string
		out  ledger.Outcome
		want ledger.Health
	}{
		{"success", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsSuccess, HTTPStatus: 201}, ledger.Well},
		{"422 about the request", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 422}, ledger.Well},
		{"404", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 404}, ledger.Well},
		{"401", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsUnauthorized, HTTPStatus: 401}, ledger.Well},
		{"409 in flight", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsInFlight, HTTPStatus: 409}, ledger.Well},
		{"503", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 503}, ledger.Unwell},
		{"500", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsUnsure, HTTPStatus: 500}, ledger.Unwell},
		{"connection refused", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsThrottled, Detail: "not sent: connection refused"}, ledger.Unwell},
		{"timeout after sending", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsUnsure}, ledger.Unwell},
		{"429", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 429}, ledger.RateLimited},
		{"a rate_limited rule on a 403", settings.DestinationHTTP, ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 403}, ledger.RateLimited},
		{"smtp 550 about one message", settings.DestinationSMTP, ledger.Outcome{Observed: ledger.ObsRejected, HTTPStatus: 550}, ledger.Well},
		{"smtp 452 mailbox full", settings.DestinationSMTP, ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 452}, ledger.Well},
		{"smtp 421 closing", settings.DestinationSMTP, ledger.Outcome{Observed: ledger.ObsThrottled, HTTPStatus: 421}, ledger.Unwell},
		{"smtp no connection", settings.DestinationSMTP, ledger.Outcome{Observed: ledger.ObsThrottled}, ledger.Unwell},
	} {
		if got := ledger.HealthOf(c.typ, c.out); got != c.want {
			t.Errorf("%s: health %d, want %d", c.name, got, c.want)
		}
	}
	for _, c := range []struct {
		name string
		r    ledger.LookupResult
		want ledger.Health
	}{
		{"found", ledger.LookupResult{Found: true, HTTPStatus: 200}, ledger.Well},
		{"absent", ledger.LookupResult{HTTPStatus: 404}, ledger.Well},
		{"lookup timed out", ledger.LookupResult{Unsure: true}, ledger.Unwell},
		{"lookup 502", ledger.LookupResult{Unsure: true, HTTPStatus: 502}, ledger.Unwell},
		{"lookup 429", ledger.LookupResult{Unsure: true, HTTPStatus: 429}, ledger.RateLimited},
	} {
		if got := ledger.LookupHealth(c.r); got != c.want {
			t.Errorf("%s: health %d, want %d", c.name, got, c.want)
		}
	}
}

// TestBreakerTally: the opening rule as a function of outcomes. It opens at the
// failure rate once min_calls are seen in the window, forgets what slid out of
// the window, never opens when off, and counts a 429 only when it keeps coming
// after the wait it asked for.
func TestBreakerTally(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 7, 14, 0, 0, 0, time.UTC)
	s := settings.BreakerSettings{FailureRate: 0.7, MinCalls: 10, Window: 5 * time.Minute}
	type call struct {
		at     time.Duration // since t0, when it was sent; answered a second later
		h      ledger.Health
		wait   time.Duration // Retry-After
		opens  bool
		calls  int
		unwell int
	}
	rep := func(n int, at time.Duration, h ledger.Health) []call {
		out := make([]call, n)
		for i := range out {
			out[i] = call{at: at, h: h, calls: -1}
		}
		return out
	}
	cat := func(parts ...[]call) []call {
		var out []call
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	for _, c := range []struct {
		name  string
		s     settings.BreakerSettings
		calls []call
	}{
		{"fewer than min_calls never open", s, cat(rep(8, 0, ledger.Unwell),
			[]call{{at: time.Second, h: ledger.Unwell, calls: 9, unwell: 9}})},
		{"the tenth unwell call opens", s, cat(rep(9, 0, ledger.Unwell),
			[]call{{at: time.Second, h: ledger.Unwell, opens: true, calls: 10, unwell: 10}})},
		{"70% opens, less does not", s, cat(rep(4, 0, ledger.Well), rep(5, 0, ledger.Unwell), []call{
			{at: 0, h: ledger.Unwell, calls: 10, unwell: 6},
			{at: 0, h: ledger.Unwell, calls: 11, unwell: 7},
			{at: 0, h: ledger.Unwell, calls: 12, unwell: 8},
			{at: 0, h: ledger.Unwell, calls: 13, unwell: 9},
			{at: 0, h: ledger.Unwell, opens: true, calls: 14, unwell: 10}})},
		{"what slid out of the window is forgotten", s, cat(rep(9, 0, ledger.Unwell),
			[]call{{at: 5*time.Minute + time.Second, h: ledger.Unwell, calls: 1, unwell: 1}})},
		{"off never opens", settings.BreakerSettings{Off: true}, cat(rep(30, 0, ledger.Unwell),
			[]call{{at: 0, h: ledger.Unwell, calls: 31, unwell: 31}})},
		{"429s within their wait are the limit working", s, cat(
			[]call{{at: 0, h: ledger.RateLimited, wait: time.Minute, calls: 0}},
			rep(10, 30*time.Second, ledger.RateLimited),
			[]call{{at: 59 * time.Second, h: ledger.RateLimited, wait: time.Minute, calls: 0}})},
		{"429s that keep coming after their wait count", s, cat(
			[]call{{at: 0, h: ledger.RateLimited, wait: 10 * time.Second, calls: 0}},
			[]call{{at: 11 * time.Second, h: ledger.RateLimited, wait: 10 * time.Second, calls: 1, unwell: 1}},
			rep(8, 22*time.Second, ledger.RateLimited),
			[]call{{at: 33 * time.Second, h: ledger.RateLimited, opens: true, calls: 10, unwell: 10}})},
		{"a 429 sent before an earlier one's wait ended is not counted", s, []call{
			{at: 0, h: ledger.RateLimited, wait: 10 * time.Second, calls: 0},
			{at: 11 * time.Second, h: ledger.RateLimited, wait: 10 * time.Second, calls: 1, unwell: 1},
			{at: 15 * time.Second, h: ledger.RateLimited, calls: 1, unwell: 1},
			{at: 21 * time.Second, h: ledger.Well, calls: 2, unwell: 1}}},
	} {
		tally := ledger.NewTally(c.s)
		for i, k := range c.calls {
			sent := t0.Add(k.at)
			opens, calls, unwell := tally.Add(sent, sent.Add(time.Second), k.h, k.wait)
			if opens != k.opens || k.calls >= 0 && (calls != k.calls || unwell != k.unwell) {
				t.Errorf("%s: call %d: opens %v with %d/%d unwell, want %v with %d/%d",
					c.name, i, opens, unwell, calls, k.opens, k.unwell, k.calls)
			}
		}
	}
}

// TestBreakerWaitDoubles: each failed probe doubles the wait, up to max_open_for.
func TestBreakerWaitDoubles(t *testing.T) {
	t.Parallel()
	s := settings.BreakerSettings{}.OrDefault()
	wait := time.Duration(0)
	var got []time.Duration
	for range 7 {
		wait = s.NextOpenFor(wait)
		got = append(got, wait)
	}
	want := []time.Duration{30 * time.Second, time.Minute, 2 * time.Minute, 4 * time.Minute, 8 * time.Minute, 10 * time.Minute, 10 * time.Minute}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}

// TestBreakerOpensOnceForEveryProcess: processes whose tallies trip at the same
// moment open the shared breaker once: one wins the conditional update, one
// transition is written, and the others are told it was not theirs.
func TestBreakerOpensOnceForEveryProcess(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	const racers = 8
	var wg sync.WaitGroup
	won := make(chan bool, racers)
	for range racers {
		wg.Go(func() {
			ok, err := ledger.OpenBreaker(ctx, pool, "crm", "503 Service Unavailable", settings.BreakerSettings{}, ledger.AlertPlan{})
			if err != nil {
				t.Error(err)
			}
			won <- ok
		})
	}
	wg.Wait()
	close(won)
	wins := 0
	for ok := range won {
		if ok {
			wins++
		}
	}
	if wins != 1 {
		t.Fatalf("%d processes opened the breaker, want 1", wins)
	}
	q := db.New(pool)
	breakers, err := ledger.Breakers(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	b := breakers["crm"]
	if b.State != ledger.BreakerOpen || b.Reason != "503 Service Unavailable" || b.OpenFor != 30*time.Second ||
		b.ProbeAt == nil || b.ProbeAt.Sub(b.Since) != 30*time.Second || b.OutageAt == nil {
		t.Fatalf("breaker %+v, want open with its reason and a probe 30s on", b)
	}
	log, err := ledger.BreakerTransitions(ctx, q, "crm", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(log) != 1 || log[0].FromState != ledger.BreakerClosed || log[0].State != ledger.BreakerOpen ||
		log[0].Actor != ledger.BreakerActorWorkers {
		t.Fatalf("transitions %+v, want the one opening", log)
	}
	// An open breaker is not opened again: its outage keeps its start.
	if ok, err := ledger.OpenBreaker(ctx, pool, "crm", "timeout", settings.BreakerSettings{}, ledger.AlertPlan{}); ok || err != nil {
		t.Fatalf("reopened an open breaker: %v %v", ok, err)
	}
}

// TestBreakerProbeAndRelease: the probe is taken once, by one process; a
// prober that died leaves its half-open breaker to the next after its lease; a
// reopen doubles nothing by itself (the caller names the wait); a close releases
// the parked actions with their due times and the time they were parked given
// back to their elapsed-time budget, and leaves the others alone.
func TestBreakerProbeAndRelease(t *testing.T) {
	t.Parallel()
	pool := dbtest.New(t)
	ctx := context.Background()
	q := db.New(pool)
	exec := func(sql string, args ...any) {
		t.Helper()
		if _, err := pool.Exec(ctx, sql, args...); err != nil {
			t.Fatal(err)
		}
	}
	fillActions(t, pool, 1, 6, `'retrying'`) // destinations d0 (even ids) and d1 (odd)
	if ok, err := ledger.OpenBreaker(ctx, pool, "d0", "503", settings.BreakerSettings{}, ledger.AlertPlan{}); !ok || err != nil {
		t.Fatalf("open: %v %v", ok, err)
	}
	// Parked an hour ago, due then; a probe's wait that has passed.
	exec(`UPDATE actions SET parked_at = now() - interval '1 hour', next_attempt_at = now() + interval '10 minutes'
	      WHERE destination = 'd0'`)
	exec(`UPDATE destinations SET breaker_probe_at = now() - interval '1 second' WHERE name = 'd0'`)
	before := map[int64]time.Time{}
	rows, err := pool.Query(ctx, `SELECT id, give_up_at FROM actions`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id int64
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			t.Fatal(err)
		}
		before[id] = at
	}
	rows.Close()

	wait, took, err := ledger.TakeBreakerProbe(ctx, pool, "d0", "w1", time.Hour)
	if err != nil || !took || wait != 30*time.Second {
		t.Fatalf("w1 takes the probe: %v %v %v", wait, took, err)
	}
	if _, took, _ := ledger.TakeBreakerProbe(ctx, pool, "d0", "w2", time.Hour); took {
		t.Fatal("w2 took a probe w1 holds")
	}
	// w1 dies: once its lease lapses, w2 takes the probe over, and w1's answer
	// comes too late to change anything.
	exec(`UPDATE destinations SET breaker_probe_until = now() - interval '1 second' WHERE name = 'd0'`)
	if _, took, err := ledger.TakeBreakerProbe(ctx, pool, "d0", "w2", time.Hour); !took || err != nil {
		t.Fatalf("w2 takes over a lapsed probe: %v %v", took, err)
	}
	if ok, err := ledger.ReopenBreaker(ctx, pool, "d0", "w1", "late", time.Minute); ok || err != nil {
		t.Fatalf("w1's late answer reopened the breaker: %v %v", ok, err)
	}
	clients := func(context.Context) ([]string, error) { return []string{"c0", "c1"}, nil }
	released, ok, err := ledger.CloseBreaker(ctx, pool, "d0", "w2", "call answered 201 (success)", ledger.AlertPlan{}, func(q *db.Queries) (int64, error) {
		return store.For(pool).ReleaseParked(ctx, q, "d0", time.Now(), clients)
	})
	if err != nil || !ok || released != 3 {
		t.Fatalf("close: released %d, %v %v", released, ok, err)
	}
	rows, err = pool.Query(ctx, `SELECT id, destination, give_up_at, next_attempt_at, parked_at IS NULL,
	                                    next_attempt_at < now() - interval '59 minutes' FROM actions ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var dest string
		var giveUp, next time.Time
		var cleared, dueSinceParked bool
		if err := rows.Scan(&id, &dest, &giveUp, &next, &cleared, &dueSinceParked); err != nil {
			t.Fatal(err)
		}
		moved := giveUp.Sub(before[id])
		switch {
		case dest == "d0" && (!cleared || !dueSinceParked || moved < 59*time.Minute || moved > 61*time.Minute):
			t.Errorf("parked action %d: cleared %v, due from when it was parked %v, budget moved %s (want about 1h)",
				id, cleared, dueSinceParked, moved)
		case dest == "d1" && moved != 0:
			t.Errorf("action %d of another destination: budget moved %s", id, moved)
		}
	}
	bs, err := ledger.Breakers(ctx, q)
	if err != nil {
		t.Fatal(err)
	}
	if b := bs["d0"]; b.State != ledger.BreakerClosed || b.LastProbe != "call answered 201 (success)" || b.OutageAt != nil {
		t.Errorf("breaker after the close: %+v", b)
	}
	log, err := ledger.BreakerTransitions(ctx, q, "d0", 10)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, tr := range log {
		got = append(got, tr.FromState+">"+tr.State)
	}
	want := []string{"half_open>closed", "half_open>half_open", "open>half_open", "closed>open"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("transitions %v, want %v", got, want)
	}
}
