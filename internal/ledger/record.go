package ledger

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/oncehook/oncehook/db"
)

// planFor is the retry budget of an action as the decision table needs it.
func (pf *Performer) planFor(a db.Action) RetryPlan {
	first := pf.now()
	if a.FirstAttemptAt != nil {
		first = *a.FirstAttemptAt
	}
	return RetryPlan{
		Attempts: int(a.Attempts), MaxAttempts: int(a.MaxAttempts), GiveUpAt: a.GiveUpAt,
		FirstAttempt: first, Owner: a.Owner, BackoffBase: pf.p.BackoffBase, BackoffMax: pf.p.BackoffMax,
	}
}

// record decides what an outcome means and writes it: the attempt's evidence and the
// action's next state, in one transaction, only while this worker holds the lease.
func (pf *Performer) record(a db.Action, attemptID int64, out Outcome) error {
	return pf.queueDecision(a, attemptID, out, decideOutcome(out, pf.planFor(a), pf.now()))
}

// decideOutcome is the decision table's answer to what a call or a lookup observed.
func decideOutcome(out Outcome, plan RetryPlan, now time.Time) Decision {
	return Decide(out.Observed, plan, out.Detail, out.RetryAfter, now)
}

// queueDecision hands a decision to the group writer and waits until the group it
// joined is committed (or has failed). It writes nothing itself unless no writer
// is at work, in which case this call becomes the writer: calls that finish
// together are recorded together, as one group in one statement (see writeGroup),
// and the decisions arriving while a group is written queue up for the next one.
// A second writer at once measured slower (make bench, end to end): the groups'
// updates contend for the same index pages, and a single writer's groups grow
// while it waits for a commit. The writing runs on a context of its own: a call
// that finished must be recorded even while the process is stopping.
func (pf *Performer) queueDecision(a db.Action, attemptID int64, out Outcome, d Decision) error {
	d.Reason = storableText(d.Reason)
	p := &pendingDecision{a: a, attemptID: attemptID, out: storable(out), d: d, done: make(chan error, 1)}
	g := &pf.decisions
	g.mu.Lock()
	g.queue = append(g.queue, p)
	if g.writing { // the writer at work takes it with its next group
		g.mu.Unlock()
		select {
		case g.arrived <- struct{}{}:
		default:
		}
		return <-p.done
	}
	g.writing = true
	for len(g.queue) > 0 {
		pf.gatherDecisions()
		n := min(len(g.queue), maxDecisionGroup)
		group := slices.Clone(g.queue[:n])
		g.queue = slices.Delete(g.queue, 0, n)
		g.mu.Unlock()
		pf.writeGroup(group)
		g.mu.Lock()
	}
	g.writing = false
	g.mu.Unlock()
	return <-p.done
}

// storable keeps what a destination said within what Postgres stores: text without
// NUL bytes or invalid UTF-8, and a reply document re-encoded (a lone UTF-16
// surrogate escape becomes U+FFFD) and without the \u0000 escape that jsonb refuses
// (it is then not kept, and the detail says so). Otherwise an outcome the
// destination really produced could never be recorded.
func storable(out Outcome) Outcome {
	out.ExternalRef, out.Detail = storableText(out.ExternalRef), storableText(out.Detail)
	if len(out.Result) == 0 {
		return out
	}
	var doc any
	dec := json.NewDecoder(bytes.NewReader(out.Result))
	dec.UseNumber() // numbers stay exactly as the destination wrote them
	clean, err := []byte(nil), dec.Decode(&doc)
	if err == nil {
		clean, err = json.Marshal(doc)
	}
	if err != nil || bytes.Contains(clean, []byte(`\u0000`)) {
		return withoutResult(out)
	}
	out.Result = clean
	return out
}

// withoutResult drops the reply document of an outcome, saying so in its detail.
func withoutResult(out Outcome) Outcome {
	out.Result = nil
	out.Detail = strings.TrimPrefix(out.Detail+"; the reply document was not kept: it holds text the database cannot store", "; ")
	return out
}

// maxDecisionGroup bounds the decisions written by one statement.
const maxDecisionGroup = 64

// decisionGroups is the queue of decisions waiting to be written, and whether a
// writer is at work on it.
type decisionGroups struct {
	mu      sync.Mutex
	queue   []*pendingDecision
	writing bool
	arrived chan struct{} // a decision joined the queue while a writer was at work
}

// recordGather is how long the writer waits for the outcomes still on their way
// before it writes a group.
const recordGather = 2 * time.Millisecond

// gatherDecisions, called by the writer with g.mu held, waits up to recordGather
// (releasing the lock meanwhile) while calls are in flight, whose outcomes will
// follow, and the group is not full. The calls of one claim go out together and
// mostly answer within a millisecond or two of each other; a writer that wrote the
// first outcome to arrive on its own wrote groups of about six, where a group costs
// Postgres about as much as one decision (parsing, planning, its commit): waiting
// for the others about halved the statements (make bench, end to end).
func (pf *Performer) gatherDecisions() {
	g := &pf.decisions
	var timer *time.Timer
	for len(g.queue) < maxDecisionGroup && pf.callsInFlight() > 0 {
		if timer == nil {
			timer = time.NewTimer(recordGather)
			defer timer.Stop()
		}
		g.mu.Unlock()
		select {
		case <-g.arrived:
			g.mu.Lock()
		case <-timer.C:
			g.mu.Lock()
			return
		}
	}
}

// callsInFlight is how many calls (and lookups) are in flight: the busy call slots.
func (pf *Performer) callsInFlight() int {
	n := len(pf.slots)
	for _, l := range pf.limits {
		n += len(l.slots)
	}
	return n
}

// pendingDecision is one decision waiting for its group's commit.
type pendingDecision struct {
	a         db.Action
	attemptID int64
	out       Outcome
	d         Decision
	done      chan error // buffered: the writer never waits for its reader
}

// writeGroup writes a group of decisions and answers each. One statement records
// the whole group, in a transaction whose statements keep their generic plans of
// lookups by key (see ActionRecordBatch), with the disconnection of a destination
// when a decision holds it. Storage trouble is retried
// briefly; if it persists, the leases expire and recovery makes the actions
// uncertain. Any other failure is retried decision by decision, so that one decision
// the database refuses cannot refuse the others.
func (pf *Performer) writeGroup(group []*pendingDecision) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	var recorded map[actionKey]bool
	var due bool
	err := retryStorage(ctx, func() error {
		return db.WithTxKeyPlanned(ctx, pf.pool, func(q *db.Queries) error {
			var err error
			recorded, due, err = pf.writeDecisions(ctx, q, group)
			return err
		})
	})
	if err == nil && due {
		pf.performers.send() // after the commit: see wakeup
	}
	if err != nil && len(group) > 1 && !db.IsUnavailable(err) {
		for _, p := range group {
			pf.writeGroup([]*pendingDecision{p})
		}
		return
	}
	if _, refused := db.Refused(err); refused && len(group) == 1 && group[0].out.Result != nil {
		// The database refuses something in the reply document: the outcome
		// still counts, so it is recorded without it.
		group[0].out = withoutResult(group[0].out)
		pf.writeGroup(group)
		return
	}
	for _, p := range group {
		switch {
		case err != nil:
			p.done <- fmt.Errorf("record outcome of action %d: %w", p.a.ID, err)
			continue
		case !recorded[actionKey{p.a.Client, p.a.ID}]:
			pf.logger.Warn("lease lost before the outcome was recorded; the attempt keeps the evidence",
				"action_id", p.a.ID, "observed", string(p.out.Observed))
		default:
			pf.logger.Debug("action outcome", "action_id", p.a.ID, "observed", string(p.out.Observed), "state", p.d.State)
		}
		p.done <- nil
	}
}

// actionKey identifies an action across clients.
type actionKey struct {
	client string
	id     int64
}

// writeDecisions records the group (see ActionRecordBatch), then does what follows
// from the new states: destinations disconnected. It returns the actions it
// recorded, and whether the group made work due now (successors released, retries
// due at once), for which the performers are to be woken.
func (pf *Performer) writeDecisions(ctx context.Context, q *db.Queries, group []*pendingDecision) (map[actionKey]bool, bool, error) {
	rec := db.ActionRecordBatchParams{Worker: pf.p.Worker}
	for _, p := range group {
		rec.Clients = append(rec.Clients, p.a.Client)
		rec.Ids = append(rec.Ids, p.a.ID)
		rec.AttemptIds = append(rec.AttemptIds, p.attemptID)
		rec.Observed = append(rec.Observed, string(p.out.Observed))
		rec.HttpStatuses = append(rec.HttpStatuses, int32(p.out.HTTPStatus))
		rec.Errors = append(rec.Errors, truncate(p.out.Detail, 1000))
		rec.States = append(rec.States, p.d.State)
		rec.Reasons = append(rec.Reasons, truncate(p.d.Reason, 1000))
		rec.NextAttemptAts = append(rec.NextAttemptAts, p.d.NextAttemptAt)
		rec.ExternalRefs = append(rec.ExternalRefs, p.out.ExternalRef)
		rec.Results = append(rec.Results, string(p.out.Result))
		rec.Owners = append(rec.Owners, p.d.Owner)
		rec.LeaseTokens = append(rec.LeaseTokens, p.a.LeaseToken)
	}
	rows, err := q.ActionRecordBatch(ctx, rec)
	if err != nil {
		return nil, false, fmt.Errorf("record outcomes: %w", err)
	}
	recorded := make(map[actionKey]bool, len(rows))
	due := false
	for _, r := range rows {
		recorded[actionKey{r.Client, r.ID}] = true
		due = due || r.Released > 0
	}
	disconnected := map[string]bool{}
	for _, p := range group {
		if !recorded[actionKey{p.a.Client, p.a.ID}] {
			continue
		}
		switch p.d.State {
		case StateHeld:
			if !disconnected[p.a.Destination] {
				disconnected[p.a.Destination] = true
				if err := pf.disconnect(ctx, q, p.a.Destination, p.out.Detail); err != nil {
					return nil, false, err
				}
			}
		case StateRetrying, StateUncertain:
			due = due || !p.d.NextAttemptAt.After(pf.now())
		}
	}
	return recorded, due, nil
}

// disconnect marks a destination whose credentials failed and holds its waiting
// actions: no further calls until an admin reconnects it.
func (pf *Performer) disconnect(ctx context.Context, q *db.Queries, name, detail string) error {
	reason := "credentials refused: " + detail
	if err := q.DestinationSetStatus(ctx, db.DestinationSetStatusParams{Name: name, Status: "disconnected", Reason: truncate(reason, 500)}); err != nil {
		return fmt.Errorf("mark destination disconnected: %w", err)
	}
	if _, err := q.ActionHoldDestination(ctx, db.ActionHoldDestinationParams{
		Destination: name, Reason: "destination " + name + " is disconnected",
	}); err != nil {
		return fmt.Errorf("hold destination's actions: %w", err)
	}
	return nil
}

// retryStorage runs fn until it succeeds, fails for a reason other than storage
// being unavailable, or ctx ends.
func retryStorage(ctx context.Context, fn func() error) error {
	delay := 100 * time.Millisecond
	for {
		err := fn()
		if err == nil || !db.IsUnavailable(err) || ctx.Err() != nil {
			return err
		}
		sleepCtx(ctx, delay)
		delay = min(delay*2, 2*time.Second)
	}
}

// splittable says whether a group write that failed with err is worth writing
// again item by item: not when storage is unavailable, which would fail each one
// alone too, but when the database refused something, which may be one item's.
func splittable(err error) bool { return !db.IsUnavailable(err) }
