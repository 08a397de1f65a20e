package main

import (
	"context"
	"fmt"
	"log"
	"time"
)

// e2eResult is one end-to-end run: n actions from the first POST to the last
// confirmation the destination gave.
type e2eResult struct {
	n            int
	elapsed      time.Duration // first POST to the last action confirmed (database clock)
	posting      time.Duration // how long the POSTs took, with the workers running
	notConfirmed map[string]int64
	creates      int // create calls the destination answered
	records      int // records it holds for these actions
	timedOut     bool
	cpu          cpuUse
	inFlight     float64 // calls the destination was answering, on average while any was
	maxInFlight  int64
	routeQueue   float64 // received events waiting for the router, on average
	dueActions   float64 // actions due and waiting for a performer, on average
}

func (r e2eResult) rate() float64 { return float64(r.n) / r.elapsed.Seconds() }

// runE2E posts n checkouts, each asking for one action, and waits until all n are
// confirmed or wait has passed.
func (b *bench) runE2E(ctx context.Context, url, prefix string, n int, wait time.Duration) (e2eResult, error) {
	res := e2eResult{n: n, notConfirmed: map[string]int64{}}
	var t0 time.Time
	if err := b.pg.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t0); err != nil {
		return res, err
	}
	creates0 := b.dest.creates()
	records0 := b.dest.crm.Len()
	before := b.parties().sample()
	start := time.Now()
	stopSampling := b.sampleInFlight(&res)
	stopBacklog := b.sampleBacklog(ctx, &res)
	p := newPoster(url, b.o.senders).spread(b.clients)
	if _, err := p.postAll(ctx, b.o.senders, n, func(i int) []byte {
		return eventBody(fmt.Sprintf("evt_%s_%d", prefix, i), fmt.Sprintf("enq_%s_%d", prefix, i), typeRouted)
	}); err != nil {
		return res, fmt.Errorf("end to end: post: %w", err)
	}
	res.posting = time.Since(start)
	timedOut, err := b.awaitConfirmed(ctx, t0, records0, n, start.Add(wait))
	if err != nil {
		return res, err
	}
	res.timedOut = timedOut
	res.cpu = before.to(b.parties().sample())
	stopSampling()
	stopBacklog()
	if err := b.readOutcomes(ctx, t0, &res); err != nil {
		return res, err
	}
	res.creates = b.dest.creates() - creates0
	res.records = b.dest.crm.Len() - records0
	return res, nil
}

// awaitConfirmed waits until the destination holds n records more than records0
// and no action created since t0 is open, or until deadline (timedOut).
func (b *bench) awaitConfirmed(ctx context.Context, t0 time.Time, records0, n int, deadline time.Time) (timedOut bool, err error) {
	// Wait for the destination to hold every record (in memory: polling a growing
	// table would cost the database more than the work it measures), then for the
	// last outcomes to be recorded, along the state index.
	for b.dest.crm.Len()-records0 < n && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	for {
		open, err := b.pg.count(ctx, `SELECT count(*) FROM actions
			WHERE state IN ('pending', 'processing', 'retrying', 'held', 'uncertain') AND created_at >= $1`, t0)
		if err != nil {
			return false, err
		}
		if open == 0 && b.dest.crm.Len()-records0 >= n {
			return false, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return true, nil
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}

// readOutcomes reads what became of the actions created since t0 into res: how
// many were confirmed and when the last one was, and how many are in each other state.
func (b *bench) readOutcomes(ctx context.Context, t0 time.Time, res *e2eResult) error {
	var last time.Time
	var confirmed int64
	if err := b.pg.pool.QueryRow(ctx, `SELECT coalesce(max(updated_at), $1), count(*) FROM actions
		WHERE state = 'confirmed' AND created_at >= $1`, t0).Scan(&last, &confirmed); err != nil {
		return err
	}
	res.n, res.elapsed = int(confirmed), last.Sub(t0)
	rows, err := b.pg.pool.Query(ctx, `SELECT state, count(*) FROM actions
		WHERE state <> 'confirmed' AND created_at >= $1 GROUP BY state`, t0)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var st string
		var c int64
		if err := rows.Scan(&st, &c); err != nil {
			return err
		}
		res.notConfirmed[st] = c
	}
	return rows.Err()
}

// sampleInFlight samples every 10 ms how many calls the destination is answering,
// until the returned stop, and leaves the mean (over busy samples) and max in res.
func (b *bench) sampleInFlight(res *e2eResult) (stop func()) {
	var sum, busy int64
	return every(10*time.Millisecond, func() {
		if n := b.dest.inFlight.Load(); n > 0 {
			sum, busy = sum+n, busy+1
			res.maxInFlight = max(res.maxInFlight, n)
		}
	}, func() {
		if busy > 0 {
			res.inFlight = float64(sum) / float64(busy)
		}
	})
}

// sampleBacklog samples every 100 ms where work waits: events for the router, due
// actions for a performer (both small sets read along their own indexes), until the
// returned stop, and leaves the means in res. It says which stage limits the run.
// On a cluster the counts read every shard, so it samples once a second there, to
// keep the bench's own reads out of the CPU per action.
func (b *bench) sampleBacklog(ctx context.Context, res *e2eResult) (stop func()) {
	var queued, due, n int64
	interval := 100 * time.Millisecond
	if len(b.pg.workers) > 0 {
		interval = time.Second
	}
	return every(interval, func() {
		var q, d int64
		if err := b.pg.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM event_queue),
			(SELECT count(*) FROM actions WHERE state IN ('pending', 'retrying', 'uncertain')
			   AND next_attempt_at <= now())`).Scan(&q, &d); err == nil {
			queued, due, n = queued+q, due+d, n+1
		}
	}, func() {
		if n > 0 {
			res.routeQueue, res.dueActions = float64(queued)/float64(n), float64(due)/float64(n)
		}
	})
}

// every runs tick at each interval until the returned stop, then done, once.
func every(interval time.Duration, tick, done func()) (stop func()) {
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-quit:
				done()
				return
			case <-t.C:
				tick()
			}
		}
	}()
	return func() { close(quit); <-finished }
}

func (r e2eResult) describe(name string) string {
	s := fmt.Sprintf("%s: %d actions confirmed in %.1f s (POSTs took %.1f s); the destination answered %d create calls "+
		"and holds %d new records; calls in flight %.1f on average, %d at most; waiting on average: %.0f events for the router, %.0f due actions for a performer",
		name, r.n, r.elapsed.Seconds(), r.posting.Seconds(), r.creates, r.records, r.inFlight, r.maxInFlight, r.routeQueue, r.dueActions)
	if len(r.notConfirmed) > 0 {
		s += fmt.Sprintf("; not confirmed: %v", r.notConfirmed)
	}
	if r.timedOut {
		s += "; TIMED OUT before all were confirmed"
	}
	return s
}

// e2eActions is how many actions an end-to-end run with the 0 ms destination
// confirms: as many as the single Postgres's run did, once it has run.
func (b *bench) e2eActions() int {
	if b.singleE2E.n > 0 {
		return b.singleE2E.n
	}
	n := int(b.baseline * 0.25 * 10) // ten seconds at the target rate
	return min(max(n, 2000), 20000)
}

// endToEnd: the real server, a destination that answers at once.
func (b *bench) endToEnd(ctx context.Context) error {
	n := b.e2eActions()
	log.Printf("end to end: %d actions, zero-latency destination", n)
	b.settle(ctx)
	b.dest.delay.Store(0)
	r, err := b.runE2E(ctx, b.srv.url, "e2e", n, 3*time.Minute)
	if err != nil {
		return err
	}
	b.e2eRate, b.singleE2E = r.rate(), r
	b.t.add(row{figure: "end to end: actions confirmed, POST to destination reply, 0 ms destination",
		value: perSec(r.rate()), target: ">= 0.25x", cpu: r.cpu.String(), key: "e2e"})
	b.t.note("%s", r.describe("end to end, 0 ms"))
	return nil
}

// endToEndSlow: a destination that takes 100 ms, with 64 calls in flight. The
// binary has no setting for the engine's concurrency, so oncehook runs in-process
// here, wired as serve wires it but with EngineParams.Concurrency 64.
func (b *bench) endToEndSlow(ctx context.Context) error {
	const inFlight, delay = 64, 100 * time.Millisecond
	n := int(300 * 1.5 * b.o.seconds.Seconds()) // a window and a half at the target rate
	log.Printf("end to end: %d actions, 100 ms destination, %d calls in flight (in-process)", n, inFlight)
	if err := b.pg.exec(ctx, `TRUNCATE actions CASCADE`); err != nil {
		return err
	}
	b.settle(ctx)
	srv, err := b.startInProcess(ctx, b.config, inFlight)
	if err != nil {
		return err
	}
	defer srv.stop()
	b.dest.delay.Store(int64(delay))
	defer b.dest.delay.Store(0)
	r, err := b.runE2E(ctx, srv.url, "slow", n, 3*time.Minute)
	if err != nil {
		return err
	}
	ideal := float64(inFlight) / delay.Seconds()
	b.t.add(row{figure: fmt.Sprintf("end to end: 100 ms destination, %d calls in flight (in-process)", inFlight),
		value: perSec(r.rate()), ratio: fmt.Sprintf("%.2fx ideal %s", r.rate()/ideal, perSec(ideal)),
		target: ">= 300/s", met: check(r.rate() >= 300), cpu: r.cpu.String()})
	b.t.note("%s", r.describe("end to end, 100 ms"))
	return nil
}
