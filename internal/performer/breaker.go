package performer

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// breakers is this process's side of the destinations' breakers: its own tally
// of each destination's calls (counting writes nothing), and the breakers' state
// as last read, which tells the claims what to park. A claim never relies on the
// copy alone: ActionClaim reads the breakers itself, so a copy a moment old only
// leaves parked actions due for that moment.
type breakers struct {
	pf *Performer

	mu      sync.Mutex
	tallies map[string]*ledger.Tally
	known   map[string]ledger.Breaker // by destination; closed ones may be missing
	readAt  time.Time
	// opening names the destinations whose breaker this process is opening
	// now: no call of theirs goes out meanwhile (the transaction that opens it
	// writes the outage and its alerts too, on Citus to every node).
	opening map[string]bool
}

func newBreakers(pf *Performer) *breakers {
	return &breakers{pf: pf, tallies: map[string]*ledger.Tally{}, known: map[string]ledger.Breaker{},
		opening: map[string]bool{}}
}

// settings is the named destination's breaker, its defaults filled in.
func (b *breakers) settings(destination string) settings.BreakerSettings {
	d, _ := b.pf.cfg.Destination(destination)
	return d.Breaker.OrDefault()
}

// read returns the breakers as last read, read again when the copy is older than
// the poll interval. A closed breaker that this process saw open forgets the
// calls its tally counted: they belong to the outage that ended.
func (b *breakers) read(ctx context.Context) map[string]ledger.Breaker {
	b.mu.Lock()
	defer b.mu.Unlock()
	if time.Since(b.readAt) < b.pf.p.Poll {
		return b.known
	}
	now, err := ledger.Breakers(ctx, db.New(b.pf.pool))
	if err != nil {
		b.pf.logger.Warn("read the breakers; the claims still leave open ones alone", "err", err)
		b.readAt = time.Now() // tried again after a poll interval, not by every call meanwhile
		return b.known
	}
	for name, old := range b.known {
		if old.Parks() && !now[name].Parks() {
			if t := b.tallies[name]; t != nil {
				t.Reset()
			}
		}
	}
	b.known, b.readAt = now, time.Now()
	return b.known
}

// forget makes the next read go to the database: a breaker changed.
func (b *breakers) forget() {
	b.mu.Lock()
	b.readAt = time.Time{}
	b.mu.Unlock()
}

// parks reports whether the named destination's breaker parks its actions, as
// last read.
func (b *breakers) parks(destination string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.known[destination].Parks()
}

// parksNow reports whether the named destination's breaker parks its actions,
// as read at most a poll interval ago, or is being opened by this process.
func (b *breakers) parksNow(ctx context.Context, destination string) bool {
	if b.read(ctx)[destination].Parks() {
		return true
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.opening[destination]
}

// setOpening marks the destination's breaker as being opened by this process,
// or no longer.
func (b *breakers) setOpening(destination string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if on {
		b.opening[destination] = true
	} else {
		delete(b.opening, destination)
	}
}

// park is one destination whose due actions a claim parks, and until when.
type park struct {
	destination string
	until       time.Time
}

// parking lists the destinations whose breakers park their actions. Each
// parked action waits past the next probe by max_open_for: a failed probe, whose
// next wait is at most that, does not make them due again, and a probe that
// succeeds releases them at once (ActionReleaseParked).
func (b *breakers) parking(ctx context.Context) []park {
	var out []park
	for name, br := range b.read(ctx) {
		if !br.Parks() {
			continue
		}
		next := time.Now()
		for _, t := range []*time.Time{br.ProbeAt, br.ProbeUntil} {
			if t != nil && t.After(next) {
				next = *t
			}
		}
		out = append(out, park{destination: name, until: next.Add(b.settings(name).MaxOpenFor)})
	}
	return out
}

// parkDue parks the client's due actions of the destinations in ps, in the
// claim's transaction, before the claim reads what is due.
func (b *breakers) parkDue(ctx context.Context, q *db.Queries, client string, ps []park) error {
	for _, p := range ps {
		if _, err := q.ActionPark(ctx, db.ActionParkParams{Client: client, Destination: p.destination, Until: p.until}); err != nil {
			return err
		}
	}
	return nil
}

// observe counts one answer of the destination to a call or lookup sent at
// sent, and opens its breaker when the tally says so. A process that finds the
// breaker opened by another changes nothing.
func (b *breakers) observe(ctx context.Context, destination string, sent time.Time, h ledger.Health, retryAfter time.Duration, detail string) {
	s := b.settings(destination)
	if s.Off {
		return
	}
	b.mu.Lock()
	t := b.tallies[destination]
	if t == nil {
		t = ledger.NewTally(s)
		b.tallies[destination] = t
	}
	parked := b.known[destination].Parks()
	b.mu.Unlock()
	open, calls, unwell := t.Add(sent, time.Now(), h, retryAfter)
	if !open || parked {
		return
	}
	reason := detail
	if reason == "" {
		reason = "unwell"
	}
	b.setOpening(destination, true)
	defer b.setOpening(destination, false) // after forget: the next read finds it open
	opened, err := ledger.OpenBreaker(context.WithoutCancel(ctx), b.pf.pool, destination, reason, s,
		ledger.AlertPlanOf(b.pf.cfg, destination))
	if err != nil {
		b.pf.logger.Warn("open a breaker; the calls go on until it opens", "destination", destination, "err", err)
		return
	}
	t.Reset()
	b.forget()
	if opened {
		b.pf.p.Metrics.BreakerChanged(destination, ledger.BreakerOpen)
		b.pf.logger.Warn("breaker opened: the destination's due actions are parked until a probe finds it well",
			"destination", destination, "calls", calls, "unwell", unwell, "reason", reason, "probe_in", s.OpenFor)
	}
}

// ProbeLoop sends the probe of each open breaker whose wait has passed (one
// across every process: the one that takes it), until ctx ends.
func (pf *Performer) ProbeLoop(ctx context.Context) {
	tick := time.NewTicker(pf.p.Poll)
	defer tick.Stop()
	for {
		pf.breakers.probeDue(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// probeDue takes and sends the probes that are due, one destination at a time.
func (b *breakers) probeDue(ctx context.Context) {
	now := time.Now()
	for name, br := range b.read(ctx) {
		if _, ok := b.pf.p.Clients[name]; !ok || !br.ProbeDue(now) || ctx.Err() != nil {
			continue // a process that cannot call the destination leaves its probe to others
		}
		wait, took, err := ledger.TakeBreakerProbe(ctx, b.pf.pool, name, b.pf.p.Worker, b.probeLease(name))
		if err != nil {
			b.pf.logger.Warn("take a breaker's probe", "destination", name, "err", err)
			continue
		}
		if took {
			b.pf.p.Metrics.BreakerChanged(name, ledger.BreakerHalfOpen)
			b.forget()
			b.read(ctx)
			b.probe(ctx, name, wait)
		}
	}
}

// probeLease is how long a process holds a probe: the destination's timeout
// and a little, so that the probe of a process that died is taken over soon
// (the action it used keeps its own lease, and is recovered as any other).
func (b *breakers) probeLease(name string) time.Duration {
	timeout := settings.DefaultTimeout
	if d, ok := b.pf.cfg.Destination(name); ok && d.Timeout > 0 {
		timeout = d.Timeout
	}
	return timeout + probeLeaseExtra
}

// probeLeaseExtra is what a probe's lease adds to its call's timeout.
const probeLeaseExtra = 5 * time.Second

// probe sends the probe this process took and closes or reopens the breaker by
// its answer. A probe this process could not send (the database failed it)
// changes nothing: its lease lapses and it is taken again.
func (b *breakers) probe(ctx context.Context, name string, wait time.Duration) {
	ctx, span := b.pf.startProbeSpan(ctx, name)
	h, answer, sent := b.probeOnce(ctx, name)
	endProbeSpan(span, h, answer)
	if !sent {
		return
	}
	s := b.settings(name)
	defer b.forget()
	if h != ledger.Well {
		next := s.NextOpenFor(wait)
		reopened, err := ledger.ReopenBreaker(context.WithoutCancel(ctx), b.pf.pool, name, b.pf.p.Worker, answer, next)
		if err != nil || !reopened {
			b.pf.logger.Warn("reopen a breaker; its probe's lease lapsed, and the next prober decides", "destination", name, "err", err)
			return
		}
		b.pf.p.Metrics.BreakerChanged(name, ledger.BreakerOpen)
		b.pf.logger.Warn("breaker probe: still unwell; open again", "destination", name, "answer", answer, "next_probe_in", next)
		return
	}
	ctx = context.WithoutCancel(ctx)
	released, ok, err := ledger.CloseBreaker(ctx, b.pf.pool, name, b.pf.p.Worker, answer, ledger.AlertPlanOf(b.pf.cfg, name),
		func(q *db.Queries) (int64, error) {
			return b.pf.store.ReleaseParked(ctx, q, name, time.Now(), q.ActionClientsWithWork)
		})
	if err != nil || !ok {
		b.pf.logger.Warn("close a breaker", "destination", name, "err", err)
		return
	}
	b.pf.p.Metrics.BreakerChanged(name, ledger.BreakerClosed)
	b.mu.Lock()
	if t := b.tallies[name]; t != nil {
		t.Reset()
	}
	b.mu.Unlock()
	b.pf.logger.Info("breaker closed: the destination answered its probe; its parked actions are released, oldest first",
		"destination", name, "answer", answer, "released", released)
	b.pf.wake.Send()
	b.pf.performers.Send()
}

// probeOnce sends one probe: the oldest parked uncertain action's lookup where
// the destination has one, else the oldest parked action's call, else (nothing
// is parked) the destination's check request. The action's budget is not spent:
// its claim counts no attempt. sent is false when nothing reached the
// destination because the database failed.
func (b *breakers) probeOnce(ctx context.Context, name string) (h ledger.Health, answer string, sent bool) {
	pf := b.pf
	dest := pf.p.Clients[name]
	q := db.New(pf.pool)
	for range 3 { // the picked action may be taken by a person's act meanwhile
		pick, err := q.ActionProbePick(ctx, db.ActionProbePickParams{Destination: name, HasLookup: dest.Capabilities().Lookup})
		if db.IsNotFound(err) {
			break
		}
		if err != nil {
			pf.logger.Warn("pick a breaker's probe", "destination", name, "err", err)
			return ledger.Unwell, "", false
		}
		c, ok, err := b.claimProbe(ctx, pick.Client, pick.ID)
		if err != nil {
			pf.logger.Warn("claim a breaker's probe", "destination", name, "err", err)
			return ledger.Unwell, "", false
		}
		if !ok {
			continue
		}
		c.probe = func(got ledger.Health, words string) { h, answer, sent = got, words, true }
		pf.work(ctx, ctx, c)
		return h, answer, sent
	}
	// Nothing of it waits: its check request asks, and only an answer of a
	// destination that is up closes the breaker (Check alone proves the
	// credentials: a 503 would have passed).
	if hc, ok := dest.(ledger.HealthChecker); ok {
		h, words := hc.CheckHealth(ctx)
		return h, "check: " + words, true
	}
	if err := dest.Check(ctx); err != nil {
		return ledger.Unwell, "check: " + err.Error(), true
	}
	return ledger.Well, "check: answered", true
}

// claimProbe claims the probe's action, and starts its call unless it is
// reconciled, in one transaction. ok is false when the action is no longer due.
func (b *breakers) claimProbe(ctx context.Context, client string, id int64) (claim, bool, error) {
	pf := b.pf
	var c claim
	ok := false
	err := db.WithTx(ctx, pf.pool, func(q *db.Queries) error {
		a, err := q.ActionClaimProbe(ctx, db.ActionClaimProbeParams{Worker: pf.p.Worker,
			LeaseSeconds: pf.leaseFor(""), Now: pf.now(), Client: client, ID: id})
		if db.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		c = claim{a: a, answered: func() {}}
		if a.ClaimedFrom != ledger.StateUncertain {
			if c.params, err = pf.fillResults(ctx, q, a); err != nil {
				return err
			}
			if c.attemptID, err = q.AttemptStart(ctx, db.AttemptStartParams{Client: a.Client, ActionID: a.ID,
				Kind: "call", OperationKey: ledger.SentKey(a), Worker: pf.p.Worker, PartDay: a.RowsDay}); err != nil {
				return fmt.Errorf("write the started call: %w", err)
			}
		}
		ok = true
		return nil
	})
	return c, ok, err
}

// callAnswer says a call's answer in a few words, for the breaker's last probe:
// its status and the observation's code, never the reply's text (which can
// quote params back).
func callAnswer(out ledger.Outcome) string {
	if out.HTTPStatus != 0 {
		return fmt.Sprintf("call answered %d (%s)", out.HTTPStatus, out.Observed.Code())
	}
	return "call: " + ledger.Truncate(out.Detail, 200)
}

// lookupAnswer says a lookup's answer in a few words.
func lookupAnswer(r ledger.LookupResult) string {
	switch {
	case r.Found:
		return "lookup found the record"
	case !r.Unsure:
		return "lookup answered: absent"
	case r.HTTPStatus != 0:
		return fmt.Sprintf("lookup answered %d", r.HTTPStatus)
	}
	return "lookup: " + ledger.Truncate(r.Detail, 200)
}
