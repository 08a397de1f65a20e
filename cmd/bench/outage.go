package main

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/oncehook/oncehook/internal/settings"
)

// The outage phase: the destination answers 503 to every request for o.outage
// while outageActions arrive over its first third, once with the destination's
// breaker off and once with the default breaker. It measures the calls made into
// the dead destination, per minute, and the time from its recovery until every
// action is settled.
const (
	outageActions     = 200
	outageConcurrency = 16 // the engine's default calls in flight
	outageDrainWait   = 3 * time.Minute
)

type outageRun struct {
	calls     int64         // requests the dead destination answered 503 to
	drained   time.Duration // recovery to the last action confirmed
	timedOut  bool          // not all settled within outageDrainWait
	confirmed int64
	failed    int64 // failed: their budget spent by the outage
	open      int64 // still not settled at the end
	records   int   // records the destination holds for these actions
}

func (b *bench) outage(ctx context.Context) error {
	if b.o.outage <= 0 {
		return nil
	}
	without, err := b.outageRun(ctx, "off", "    breaker: off\n")
	if err != nil {
		return fmt.Errorf("outage, breaker off: %w", err)
	}
	with, err := b.outageRun(ctx, "on", "") // the default breaker
	if err != nil {
		return fmt.Errorf("outage, default breaker: %w", err)
	}
	perMin := func(r outageRun) float64 { return float64(r.calls) / b.o.outage.Minutes() }
	def := settings.BreakerSettings{}.OrDefault()
	// With the breaker, the calls made while down are at most: the min_calls that
	// open it, the calls already in flight when it opens, and one probe a wait.
	probes, wait := 0, time.Duration(0)
	for at := time.Duration(0); at < b.o.outage; at += wait {
		wait = def.NextOpenFor(wait)
		probes++
	}
	bound := int64(def.MinCalls + outageConcurrency + probes)
	b.t.add(row{figure: fmt.Sprintf("dead destination (503 for %s, %d actions over its first third): calls to it per minute, breaker on (off)",
		b.o.outage, outageActions),
		value:  fmt.Sprintf("%.0f/min (%.0f/min)", perMin(with), perMin(without)),
		ratio:  fmt.Sprintf("%.3fx without", perMin(with)/max(perMin(without), 1)),
		target: fmt.Sprintf("<= %d calls in all", bound), met: check(with.calls <= bound)})
	b.t.add(row{figure: "dead destination: its recovery to every action confirmed once, breaker on (off)",
		value:  fmt.Sprintf("%s (%s)", with.describeDrain(), without.describeDrain()),
		target: fmt.Sprintf("all %d, none failed", outageActions),
		met:    check(!with.timedOut && with.confirmed == outageActions && with.records == outageActions && with.failed == 0)})
	for _, r := range []struct {
		name string
		run  outageRun
	}{{"on", with}, {"off", without}} {
		b.t.note("outage, breaker %s: %d calls while down, %d confirmed, %d failed, %d not settled, %d records in the destination",
			r.name, r.run.calls, r.run.confirmed, r.run.failed, r.run.open, r.run.records)
	}
	b.t.note("outage: with the breaker, recovery waits for the next probe, at most open_for (%s) doubled per failed probe, capped at %s",
		def.OpenFor, def.MaxOpenFor)
	return nil
}

func (r outageRun) describeDrain() string {
	if r.timedOut {
		return fmt.Sprintf("%d of %d after %s", r.confirmed, outageActions, outageDrainWait)
	}
	return fmt.Sprintf("%.1f s", r.drained.Seconds())
}

// outageRun runs one outage against an in-process server whose destination has
// the breaker line given (empty: the default breaker).
func (b *bench) outageRun(ctx context.Context, name, breaker string) (outageRun, error) {
	var res outageRun
	log.Printf("outage, breaker %s: the destination answers 503 for %s", name, b.o.outage)
	if err := b.pg.exec(ctx, `TRUNCATE actions, breaker_transitions CASCADE; DELETE FROM destinations`); err != nil {
		return res, err
	}
	b.settle(ctx)
	config := filepath.Join(b.dir, "outage-"+name+".yaml")
	text := benchConfig("127.0.0.1:0", b.dest.url)
	text = strings.Replace(text, "    owner: crm-admin@example.com\n", "    owner: crm-admin@example.com\n"+breaker, 1)
	if err := os.WriteFile(config, []byte(text), 0o644); err != nil {
		return res, err
	}
	srv, err := b.startInProcess(ctx, config, outageConcurrency)
	if err != nil {
		return res, err
	}
	defer srv.stop()
	var t0 time.Time
	if err := b.pg.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&t0); err != nil {
		return res, err
	}
	records0 := b.dest.crm.Len()
	b.dest.downCalls.Store(0)
	b.dest.down.Store(true)
	recovery := time.Now().Add(b.o.outage)
	if err := b.postOutageActions(ctx, srv.url, name); err != nil {
		return res, err
	}
	log.Printf("outage, breaker %s: %d actions posted, %d calls into the dead destination so far", name, outageActions, b.dest.downCalls.Load())
	select { // the rest of the outage
	case <-time.After(time.Until(recovery)):
	case <-ctx.Done():
		return res, ctx.Err()
	}
	b.dest.down.Store(false)
	res.calls = b.dest.downCalls.Load()
	var back time.Time
	if err := b.pg.pool.QueryRow(ctx, `SELECT clock_timestamp()`).Scan(&back); err != nil {
		return res, err
	}
	log.Printf("outage, breaker %s: the destination is back after %d calls; waiting for the backlog", name, res.calls)
	if err := b.awaitSettled(ctx, t0, &res); err != nil {
		return res, err
	}
	var last time.Time
	if err := b.pg.pool.QueryRow(ctx, `SELECT coalesce(max(updated_at), $1), count(*) FILTER (WHERE state = 'confirmed'),
		count(*) FILTER (WHERE state = 'failed') FROM actions WHERE created_at >= $1`, t0).
		Scan(&last, &res.confirmed, &res.failed); err != nil {
		return res, err
	}
	res.drained = max(last.Sub(back), 0)
	res.records = b.dest.crm.Len() - records0
	return res, nil
}

// postOutageActions posts the outage's actions at a steady pace over its first third.
func (b *bench) postOutageActions(ctx context.Context, url, name string) error {
	p := newPoster(url, 4)
	tick := time.NewTicker(b.o.outage / 3 / (outageActions / 10))
	defer tick.Stop()
	for sent := 0; sent < outageActions; sent += 10 {
		if _, err := p.postAll(ctx, 4, 10, func(i int) []byte {
			id := fmt.Sprintf("outage_%s_%d", name, sent+i)
			return eventBody("evt_"+id, "enq_"+id, typeRouted)
		}); err != nil {
			return fmt.Errorf("post: %w", err)
		}
		<-tick.C
	}
	return nil
}

// awaitSettled waits until no action created since t0 is open, or outageDrainWait
// has passed (res.timedOut), leaving the count still open in res.
func (b *bench) awaitSettled(ctx context.Context, t0 time.Time, res *outageRun) error {
	deadline := time.Now().Add(outageDrainWait)
	for {
		open, err := b.pg.count(ctx, `SELECT count(*) FROM actions
			WHERE state IN ('pending', 'processing', 'retrying', 'held', 'uncertain') AND created_at >= $1`, t0)
		if err != nil {
			return err
		}
		res.open = open
		if open == 0 {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			res.timedOut = true
			break
		}
		time.Sleep(100 * time.Millisecond) // poll interval
	}
	return nil
}
