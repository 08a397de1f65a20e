package performer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/batch"
	"github.com/oncehook/oncehook/internal/jsonpointer"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
	"github.com/oncehook/oncehook/internal/tracing"
)

// Performer claims due actions under a lease, calls their destinations and records
// each outcome through the decision table.
type Performer struct {
	p      Params
	pool   *pgxpool.Pool
	cfg    *settings.Config
	logger *slog.Logger
	now    func() time.Time

	wake       batch.Signal
	performers *batch.Wakeup // every process's performers, woken when outcomes make work due now
	slots      *batch.Slots  // one per call in flight
	claimed    *batch.Slots  // one per claimed action not answered yet (shared slots only)
	unrecorded *batch.Slots  // one per claimed action whose outcome is not yet recorded
	inflight   sync.WaitGroup
	decisions  *batch.Writer[pendingDecision, struct{}] // outcomes recorded together (newRecorder)
	lanes      *ledger.Lanes                            // the clients it claims actions for in turn
	breakers   *breakers                                // the destinations' breakers (breaker.go)
	store      store.Store                              // what Citus does differently

	// Derived from the config once: the config does not change while it runs.
	callable     []string              // destinations this process calls
	fillNames    []string              // rules whose params wait for a predecessor's result
	limits       map[string]*destLimit // destinations with limits of their own, by name
	limitedNames []string
}

// SetDefaults fills in the zero fields of p.
func (p *Params) SetDefaults() {
	if p.Worker == "" {
		host, _ := os.Hostname()
		b := make([]byte, 4)
		_, _ = rand.Read(b)
		p.Worker = fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b))
	}
	if p.Poll <= 0 {
		p.Poll = time.Second
	}
	if p.LeaseExtra <= 0 {
		p.LeaseExtra = 30 * time.Second
	}
	if p.BackoffBase <= 0 {
		p.BackoffBase = 2 * time.Second
	}
	if p.BackoffMax <= 0 {
		p.BackoffMax = time.Hour
	}
	if p.Concurrency <= 0 {
		p.Concurrency = 16
	}
	if p.Grace <= 0 {
		p.Grace = 10 * time.Second
	}
	if p.Logger == nil {
		p.Logger = slog.Default()
	}
	if p.Now == nil {
		p.Now = time.Now
	}
}

// New returns the performer of p, whose defaults are set; performers wakes
// every process's performers, mode tells whether the database is Citus.
func New(p Params, st store.Store, performers *batch.Wakeup) *Performer {
	callable, fillNames := callsToStart(p.Config, p.Clients)
	limits := newLimits(p.Config, callable, p.Concurrency)
	pf := &Performer{
		p: p, pool: p.Pool, cfg: p.Config, logger: p.Logger, now: p.Now, store: st,
		callable: callable, fillNames: fillNames, limits: limits, limitedNames: limitedNames(limits),
		wake:       batch.NewSignal(),
		performers: performers,
		slots:      batch.NewSlots(p.Concurrency),
		claimed:    batch.NewSlots(p.Concurrency + extraClaims(p.Config, callable, limits, p.Concurrency)),
		unrecorded: batch.NewSlots(4 * p.Concurrency),
	}
	pf.decisions = pf.newRecorder()
	pf.breakers = newBreakers(pf)
	pf.lanes = ledger.NewLanes(p.Config, p.Logger, func(ctx context.Context) ([]string, error) {
		return db.New(p.Pool).ActionClientsWithWork(ctx)
	})
	return pf
}

// Worker is the name this performer writes into leases and attempts.
func (pf *Performer) Worker() string { return pf.p.Worker }

// Wake makes the performer look for due actions now.
func (pf *Performer) Wake() { pf.wake.Send() }

// PerformLoop claims and performs due actions until ctx ends.
func (pf *Performer) PerformLoop(ctx context.Context) {
	batch.Loop(ctx, pf.logger, pf.p.Poll, pf.wake, "perform", pf.performBatch)
}

// RecoverLoop applies the decision table to lapsed leases, and releases stray held
// actions, until ctx ends.
func (pf *Performer) RecoverLoop(ctx context.Context) {
	tick := time.NewTicker(max(pf.p.LeaseExtra/3, 100*time.Millisecond))
	defer tick.Stop()
	for {
		if _, err := pf.RecoverLeases(ctx); err != nil && ctx.Err() == nil {
			pf.logger.Warn("recover expired leases", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// performBatch claims as many due actions as there is room for (see room), starting
// the calls among them in the same statement, and works on each in its own
// goroutine, which takes a call slot before it calls. A destination with limits is
// claimed apart, for its own free slots (limits.go). It returns how many it claimed.
func (pf *Performer) performBatch(ctx context.Context) (int, error) {
	free := pf.room()
	if free == 0 && len(pf.limits) == 0 {
		// Wait for room, then claim for it at once rather than sleeping until the
		// next notification or poll. (With limited destinations, a freed slot of
		// any kind wakes the loop instead.)
		for _, s := range []*batch.Slots{pf.claimed, pf.unrecorded} {
			if s.WaitRoom(ctx, 1) != nil {
				return 0, nil
			}
		}
		free = max(pf.room(), 1)
	}
	free = pf.gather(ctx, free)
	// One transaction claims and starts the calls. It commits only after its
	// results were read: a worker that dies before then leaves nothing behind. It
	// runs to its end even when the process starts stopping meanwhile, so that a
	// commit is never cut off after the server made it (its calls are then made,
	// within the grace period).
	if ctx.Err() != nil {
		return 0, nil
	}
	stopCtx := ctx
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	total := 0
	clients := pf.lanes.Round(ctx)
	if err := pf.parkDue(ctx, clients); err != nil {
		return 0, fmt.Errorf("park the actions of open breakers: %w", err)
	}
	for _, spec := range pf.claimSpecs(free) {
		var batch []claim
		// Index planned, as the router's statements are: a generic plan made
		// while a new database's actions table was empty must not walk the whole
		// table once a burst has filled it (see db.IndexPlanned).
		err := pf.store.InTx(ctx, pf.pool, store.Indexed, func(q *db.Queries) error {
			var err error
			batch, err = pf.claimRound(ctx, q, clients, spec)
			return err
		})
		if err != nil {
			return total, fmt.Errorf("claim actions: %w", err)
		}
		for _, c := range batch {
			pf.launch(ctx, stopCtx, c)
		}
		total += len(batch)
	}
	return total, nil
}

// parkDue parks the clients' due actions of the destinations whose breakers
// are open, before they are claimed: the claims leave them alone anyway, and
// once parked they no longer read them either.
func (pf *Performer) parkDue(ctx context.Context, clients []string) error {
	ps := pf.breakers.parking(ctx)
	if len(ps) == 0 {
		return nil
	}
	return pf.store.InTx(ctx, pf.pool, store.Indexed, func(q *db.Queries) error {
		for _, client := range clients {
			if err := pf.breakers.parkDue(ctx, q, client, ps); err != nil {
				return err
			}
		}
		return nil
	})
}

// claimRound claims up to spec.n actions, going round the clients (see lanes):
// the next client's due work first, the following clients' for the rest of the
// room, each claim naming one client. The calls that wait for a predecessor's
// result are started after every claim, since starting them switches the
// transaction's planner settings (db.PlanByKey) and a claim's kept plan must be
// made under the claim's own.
func (pf *Performer) claimRound(ctx context.Context, q *db.Queries, clients []string, spec claimSpec) ([]claim, error) {
	var claimed [][]db.ActionClaimRow
	n := 0
	for _, client := range clients {
		if n == spec.n {
			break
		}
		p := pf.claimParams(client, spec.n-n)
		if spec.only != nil {
			p.OnlyDestinations = spec.only
		}
		if spec.skip != nil {
			p.SkipDestinations = spec.skip
		}
		rows, err := pf.store.ClaimActions(ctx, q, p)
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			claimed, n = append(claimed, rows), n+len(rows)
		}
	}
	var batch []claim
	for _, rows := range claimed {
		started, err := pf.startCalls(ctx, q, rows)
		if err != nil {
			return nil, err
		}
		batch = append(batch, started...)
	}
	return batch, nil
}

// launch works on a claimed action in its own goroutine, holding its room (its
// destination's own slots, or the worker's room and then a call slot) until its
// call is answered.
func (pf *Performer) launch(ctx, stopCtx context.Context, c claim) {
	pf.unrecorded.Hold() // claimed for the room there is, as below
	if l := pf.limits[c.a.Destination]; l != nil {
		l.slots.Hold()
		c.limit = l
		c.answered = sync.OnceFunc(func() { l.slots.Free(); pf.wake.Send() })
	} else {
		pf.claimed.Hold()
		c.slot = new(atomic.Bool)
		c.answered = sync.OnceFunc(func() {
			if c.slot.Load() {
				pf.slots.Free()
			}
			pf.claimed.Free()
			if len(pf.limits) > 0 {
				pf.wake.Send()
			}
		})
	}
	pf.inflight.Add(1)
	go func() {
		defer func() { c.answered(); pf.unrecorded.Free(); pf.inflight.Done() }()
		if c.slot != nil && !pf.takeSlot(stopCtx, c.slot) {
			pf.notSent(c, "the worker stopped before the call was sent")
			return
		}
		pf.work(context.WithoutCancel(ctx), stopCtx, c)
	}()
}

// gather waits up to batch.ClaimWait, while there is room for fewer actions than there
// are call slots, for that much room, and returns the room then. A claim costs
// Postgres about as much for one action as for sixteen (parsing, planning, its
// commit), and so does recording their outcomes, which arrive together when their
// calls went out together; taking whatever had just come free would claim in
// fragments. With room for a whole batch (whenever the worker is not busy) it
// claims at once. With limited destinations a freed slot of any kind wakes the
// loop instead.
func (pf *Performer) gather(ctx context.Context, free int) int {
	want := min(pf.slots.Cap(), pf.claimed.Cap())
	if free >= want || len(pf.limits) > 0 || ctx.Err() != nil {
		return free
	}
	// Only this loop takes claimed slots, so the room WaitRoom saw free stays free.
	ctx, cancel := context.WithTimeout(ctx, batch.ClaimWait)
	defer cancel()
	_ = pf.claimed.WaitRoom(ctx, want) // the wait being over is no error
	return max(pf.room(), free)
}

// takeSlot waits for a call slot for a claimed action, and reports false when the
// process stops first. slot records that it was taken, for answered to free it.
func (pf *Performer) takeSlot(stopCtx context.Context, slot *atomic.Bool) bool {
	// Once the process stops, a free slot is taken anyway: a call claimed for is made.
	if pf.slots.Take(stopCtx) != nil && !pf.slots.TryTake() {
		return false
	}
	slot.Store(true)
	return true
}

// extraClaims is how many more actions than call slots a worker may hold claimed,
// their calls started and waiting for a slot, when every destination it shares its
// slots between resolves an unsent started call by itself (see queueSafe): a
// claim, like a call, waits for its commit, and with claims only for free slots the
// slots stood idle while the next claim committed.
func extraClaims(cfg *settings.Config, callable []string, limits map[string]*destLimit, concurrency int) int {
	if len(limits) > 0 {
		return 0
	}
	for _, name := range callable {
		if d, ok := cfg.Destination(name); !ok || !queueSafe(d) {
			return 0
		}
	}
	return concurrency
}

// queueSafe says whether a call started but never sent (its worker gone while the
// call waited for a slot) is settled without a person: the destination has a
// strong lookup, whose "absent" retries with the same key, or remembers
// idempotency keys, so a retry with the same key is safe (the decision table).
func queueSafe(d settings.Destination) bool {
	return d.Type == settings.DestinationHTTP &&
		(d.Lookup.URL != "" && d.Lookup.Consistency == settings.ConsistencyStrong || d.Idempotency.TTL > 0)
}

// claimSpec is one claim of a batch: up to n actions, of the only destinations
// (when set), skipping the skip ones.
type claimSpec struct {
	n          int
	only, skip []string
}

// claimSpecs plans a batch's claims: the shared slots for the destinations without
// limits, then each limited destination for its own free slots, all within the room
// for outcomes waiting to be recorded.
func (pf *Performer) claimSpecs(free int) []claimSpec {
	budget := pf.unrecorded.Room()
	var specs []claimSpec
	if n := min(free, budget); n > 0 {
		specs = append(specs, claimSpec{n: n, skip: pf.limitedNames})
		budget -= n
	}
	for _, name := range pf.limitedNames {
		if n := min(pf.limits[name].room(), budget); n > 0 {
			specs = append(specs, claimSpec{n: n, only: []string{name}})
			budget -= n
		}
	}
	return specs
}

// room is how many more actions this worker can take on now: room among the
// claims waiting for their destination's answer (a call slot for each, and
// extraClaims more), and among the outcomes waiting to be recorded.
func (pf *Performer) room() int {
	return min(pf.claimed.Room(), pf.unrecorded.Room())
}

// claim is one claimed action and what was prepared for it before its call.
type claim struct {
	a         db.Action
	params    json.RawMessage // the stored params with predecessors' results filled in
	attemptID int64           // the started call; 0 when the action is reconciled or has no destination
	answered  func()          // frees the call slot once the destination has answered
	limit     *destLimit      // the destination's own limits; nil for the shared slots
	slot      *atomic.Bool    // a shared call slot was taken for it (takeSlot); nil with limit
	// probe, set on a breaker's probe, is told the destination's health instead
	// of the process's tally (breaker.go).
	probe func(h ledger.Health, detail string)
}

// claimParams asks for up to n claims of the client's actions, and for the calls
// the claim itself can start (see callsToStart).
func (pf *Performer) claimParams(client string, n int) db.ActionClaimParams {
	return db.ActionClaimParams{Client: client, MaxActions: int32(n), Worker: pf.p.Worker, LeaseSeconds: pf.leaseFor(""),
		Callable: pf.callable, FillNames: pf.fillNames, OnlyDestinations: []string{}, SkipDestinations: []string{}}
}

// callsToStart is what a claim needs to start calls by itself: the destinations this
// process has, and the rules whose calls wait for a predecessor's result, which are
// filled in first (see startCalls).
func callsToStart(cfg *settings.Config, destinations map[string]ledger.DestinationClient) (callable, fillNames []string) {
	callable, fillNames = make([]string, 0, len(destinations)), []string{}
	for name := range destinations {
		callable = append(callable, name)
	}
	for _, rule := range cfg.Actions {
		if slices.ContainsFunc(rule.Params, settings.Param.HasResult) {
			fillNames = append(fillNames, rule.Name)
		}
	}
	return callable, fillNames
}

// startCalls turns the claimed rows into work, inside the claiming transaction. Most
// calls were started by the claim itself; the ones that wait for a predecessor's
// result get their params filled in here and are started by one more statement. An
// action whose params cannot be prepared is left out: its lease expires without a
// started call and recovery makes it due again.
func (pf *Performer) startCalls(ctx context.Context, q *db.Queries, rows []db.ActionClaimRow) ([]claim, error) {
	batch := make([]claim, 0, len(rows))
	var fill []claim
	var p db.ActionStartCallsParams
	for _, r := range rows {
		c := claim{a: r.Action(), attemptID: r.AttemptID}
		_, configured := pf.p.Clients[c.a.Destination]
		switch {
		case c.attemptID != 0:
			c.params = c.a.Params
		case c.a.ClaimedFrom != ledger.StateUncertain && configured:
			params, err := pf.fillResults(ctx, q, c.a)
			if err != nil {
				pf.logger.Warn("cannot prepare the call; its lease will expire and it will be tried again",
					tracing.ActionIDs(ctx, c.a), "err", err)
				continue
			}
			c.params = params
			fill = append(fill, c)
			p.Clients, p.Ids = append(p.Clients, c.a.Client), append(p.Ids, c.a.ID)
			continue
		}
		batch = append(batch, c)
	}
	if len(fill) == 0 {
		return batch, nil
	}
	// A claim is one client's.
	p.Worker, p.Client = pf.p.Worker, rows[0].Client
	started, err := pf.store.StartCalls(ctx, q, p)
	if err != nil {
		return nil, fmt.Errorf("start calls: %w", err)
	}
	byAction := make(map[actionKey]db.ActionStartCallsRow, len(started))
	for _, r := range started {
		byAction[actionKey{r.Client, r.ID}] = r
	}
	for _, c := range fill {
		if r, ok := byAction[actionKey{c.a.Client, c.a.ID}]; ok { // always, inside the claiming transaction
			c.a.Attempts, c.a.FirstAttemptAt, c.attemptID = r.Attempts, r.FirstAttemptAt, r.AttemptID
			batch = append(batch, c)
		}
	}
	return batch, nil
}

// leaseFor is the lease for a call to the named destination: longer than its timeout,
// so a lease never expires while a live worker is still waiting for the reply.
func (pf *Performer) leaseFor(destination string) float64 {
	timeout := pf.maxTimeout()
	if d, ok := pf.cfg.Destination(destination); ok {
		timeout = d.Timeout
	}
	return (timeout + pf.p.LeaseExtra).Seconds()
}

func (pf *Performer) maxTimeout() time.Duration {
	var m time.Duration
	for _, d := range pf.cfg.Destinations {
		m = max(m, d.Timeout)
	}
	if m == 0 { // no destination configured: nothing is called
		m = settings.DefaultTimeout
	}
	return m
}

// work performs or reconciles one claimed action. callCtx outlives a shutdown for the
// grace period; stopCtx ending means the process is stopping.
func (pf *Performer) work(callCtx, stopCtx context.Context, c claim) {
	a := c.a
	ctx, cancel := context.WithCancel(callCtx)
	defer cancel()
	go func() { // a call still running after the grace period is abandoned to recovery
		select {
		case <-ctx.Done():
		case <-stopCtx.Done():
			select {
			case <-ctx.Done():
			case <-time.After(pf.p.Grace):
				cancel()
			}
		}
	}()
	stopRenew := pf.renewLease(ctx, a)
	defer stopRenew()
	// The rate wait holds only the destination's own slot, with the lease renewed. A
	// call not sent yet has nothing to finish: it stops waiting when the process stops.
	waitCtx, stopWaiting := context.WithCancel(ctx)
	unregister := context.AfterFunc(stopCtx, stopWaiting)
	waited, err := c.limit.wait(waitCtx)
	unregister()
	stopWaiting()
	if err != nil {
		pf.notSent(c, "the worker stopped while waiting for the destination's rate limit")
		return
	}
	if waited && !pf.stillHolds(ctx, a) {
		// The lease lapsed during the wait: recovery may have handed the action to
		// another worker, so this one must not call.
		pf.logger.Warn("lost the lease while waiting for the destination's rate; not calling", tracing.ActionIDs(ctx, a))
		return
	}
	if c.probe == nil && pf.breakers.parksNow(ctx, a.Destination) {
		// Claimed before its destination's breaker opened, and not sent yet: it
		// waits with the others (a lookup's lease lapses and recovery keeps it
		// uncertain).
		pf.notSent(c, "its destination's breaker opened before the call went out")
		return
	}
	if a.ClaimedFrom == ledger.StateUncertain {
		err = pf.reconcile(ctx, c)
	} else {
		err = pf.call(ctx, c)
	}
	if err != nil {
		pf.logger.Warn("action step failed; its lease will expire and recovery decides",
			tracing.ActionIDs(ctx, a), "err", err)
	}
}

// notSent records that a started call was never sent, so the table retries it
// (a started attempt left to lease recovery would be reconciled, and without a
// lookup sent to a person, although nothing reached the destination).
func (pf *Performer) notSent(c claim, why string) {
	if c.a.ClaimedFrom == ledger.StateUncertain || c.attemptID == 0 {
		return // a lookup, or nothing started: recovery's own row is right
	}
	if err := pf.record(c.a, c.attemptID, ledger.Outcome{Observed: ledger.ObsThrottled, Detail: "not sent: " + why, NotSent: true}); err != nil {
		pf.logger.Warn("record a call that was not sent; its lease will expire and recovery decides",
			tracing.ActionIDs(nil, c.a), "err", err)
	}
}

// stillHolds renews a's lease now and reports whether this worker still holds it.
func (pf *Performer) stillHolds(ctx context.Context, a db.Action) bool {
	n, err := pf.renew(ctx, a)
	return err == nil && n == 1
}

// renew extends a's lease while this worker holds it under the claim's token; it
// returns how many rows it renewed (0: the lease is no longer this claim's).
func (pf *Performer) renew(ctx context.Context, a db.Action) (int64, error) {
	return db.New(pf.pool).ActionRenewLease(ctx, db.ActionRenewLeaseParams{
		Client: a.Client, ID: a.ID, Worker: &pf.p.Worker, LeaseSeconds: pf.leaseFor(a.Destination),
		LeaseToken: a.LeaseToken,
	})
}

// renewLease keeps the lease alive while the call is in flight.
func (pf *Performer) renewLease(ctx context.Context, a db.Action) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	every := max(pf.p.LeaseExtra/3, 50*time.Millisecond)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if _, err := pf.renew(ctx, a); err != nil && ctx.Err() == nil {
					pf.logger.Debug("renew lease", tracing.ActionIDs(ctx, a), "err", err)
				}
			}
		}
	}()
	return cancel
}

// call performs one started attempt: the call runs outside any transaction, and the
// outcome is recorded through the decision table.
func (pf *Performer) call(ctx context.Context, c claim) error {
	a := c.a
	dest, ok := pf.p.Clients[a.Destination]
	if !ok {
		return pf.record(a, 0, ledger.Outcome{Observed: ledger.ObsRejected, Detail: "destination " + a.Destination + " is not configured"})
	}
	start := time.Now()
	callCtx, span := pf.startCallSpan(ctx, "oncehook.attempt", a)
	out := dest.Perform(callCtx, ledger.Call{OperationKey: ledger.SentKey(a), Params: c.params, ActionName: a.Name, BusinessKey: a.BusinessKey})
	endCallSpan(span, out.Observed, out.HTTPStatus)
	c.answered()
	pf.p.Metrics.Attempt(a.Destination, out.Observed, time.Since(start))
	pf.logger.Debug("destination called", tracing.ActionIDs(callCtx, a), "destination", a.Destination,
		"observed", string(out.Observed), "status", out.HTTPStatus)
	d, _ := pf.cfg.Destination(a.Destination)
	if h := ledger.HealthOf(d.Type, out); c.probe != nil {
		c.probe(h, callAnswer(out))
	} else {
		pf.breakers.observe(ctx, a.Destination, start, h, out.RetryAfter, callAnswer(out))
	}
	return pf.record(a, c.attemptID, out)
}

// fillResults adds the params that name a predecessor's result, nested ones
// included, to the stored ones.
func (pf *Performer) fillResults(ctx context.Context, q *db.Queries, a db.Action) (json.RawMessage, error) {
	rule, ok := pf.cfg.Action(a.Name)
	if !ok || a.AfterID == nil || !slices.ContainsFunc(rule.Params, settings.Param.HasResult) {
		return a.Params, nil
	}
	params := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(a.Params))
	dec.UseNumber() // amounts and ids pass through digit for digit
	if err := dec.Decode(&params); err != nil {
		return nil, fmt.Errorf("decode stored params: %w", err)
	}
	chain, err := predecessors(ctx, q, a)
	if err != nil {
		return nil, err
	}
	fillObject(params, rule.Params, func(p settings.Param) (any, bool) {
		pred, ok := chain[p.Result]
		if !ok {
			return nil, false
		}
		if p.ResultPointer == "" {
			return pred.ExternalRef, true
		}
		var doc any
		if len(pred.Result) > 0 {
			_ = json.Unmarshal(pred.Result, &doc)
		}
		v, _ := jsonpointer.Get(doc, p.ResultPointer)
		return v, true
	})
	b, err := json.Marshal(params)
	if err != nil {
		return nil, fmt.Errorf("encode params: %w", err)
	}
	return b, nil
}

// fillObject puts each result param of params, at any depth, into obj.
func fillObject(obj map[string]any, params []settings.Param, value func(settings.Param) (any, bool)) {
	for _, p := range params {
		switch {
		case p.Result != "":
			if v, ok := value(p); ok {
				obj[p.Name] = v
			}
		case p.IsObject:
			if m, ok := obj[p.Name].(map[string]any); ok {
				fillObject(m, p.Object, value)
			}
		case p.IsList:
			if l, ok := obj[p.Name].([]any); ok {
				fillList(l, p.List, value)
			}
		}
	}
}

func fillList(list []any, params []settings.Param, value func(settings.Param) (any, bool)) {
	for i, p := range params[:min(len(params), len(list))] {
		switch {
		case p.Result != "":
			if v, ok := value(p); ok {
				list[i] = v
			}
		case p.IsObject:
			if m, ok := list[i].(map[string]any); ok {
				fillObject(m, p.Object, value)
			}
		case p.IsList:
			if l, ok := list[i].([]any); ok {
				fillList(l, p.List, value)
			}
		}
	}
}

// predecessors walks the after chain of a, by rule name.
func predecessors(ctx context.Context, q *db.Queries, a db.Action) (map[string]db.Action, error) {
	chain := map[string]db.Action{}
	for next := a.AfterID; next != nil && len(chain) < 32; {
		p, err := q.ActionGetByKey(ctx, db.ActionGetByKeyParams{Client: a.Client, ID: *next})
		if err != nil {
			return nil, fmt.Errorf("read predecessor %d: %w", *next, err)
		}
		chain[p.Name] = p
		next = p.AfterID
	}
	return chain, nil
}

// Params configures the workers. Zero durations take the defaults.
type Params struct {
	Pool        *pgxpool.Pool
	Config      *settings.Config
	Clients     map[string]ledger.DestinationClient // each destination's client, by its name
	Logger      *slog.Logger
	Worker      string           // this process's name in leases; default host-pid-random
	Poll        time.Duration    // fallback polling when no notification arrives; default 1s
	LeaseExtra  time.Duration    // lease = destination timeout + this; default 30s
	BackoffBase time.Duration    // first retry delay; default 2s
	BackoffMax  time.Duration    // default 1h
	Concurrency int              // destination calls in flight; default 16
	Grace       time.Duration    // how long in-flight calls may finish at shutdown; default 10s
	Metrics     *metrics.Metrics // may be nil
	Now         func() time.Time
}
