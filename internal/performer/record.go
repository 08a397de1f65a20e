package performer

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/batch"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/store"
	"github.com/oncehook/oncehook/internal/tracing"
)

// planFor is the retry budget of an action as the decision table needs it.
func (pf *Performer) planFor(a db.Action) ledger.RetryPlan {
	first := pf.now()
	if a.FirstAttemptAt != nil {
		first = *a.FirstAttemptAt
	}
	return ledger.RetryPlan{
		Attempts: int(a.Attempts), MaxAttempts: int(a.MaxAttempts), GiveUpAt: a.GiveUpAt,
		FirstAttempt: first, Owner: a.Owner, BackoffBase: pf.p.BackoffBase, BackoffMax: pf.p.BackoffMax,
		Parked: pf.breakers.parks(a.Destination),
	}
}

// record decides what an outcome means and writes it: the attempt's evidence and the
// action's next state, in one transaction, only while this worker holds the lease.
func (pf *Performer) record(a db.Action, attemptID int64, out ledger.Outcome) error {
	return pf.queueDecision(a, attemptID, out, ledger.DecideOutcome(out, pf.planFor(a), pf.now()))
}

// queueDecision hands a decision to the recorder (see newRecorder) and waits until
// the group it joined is committed (or has failed): calls that finish together are
// recorded together, as one group in one statement (see writeGroup), and the
// decisions arriving while a group is written queue up for the next one. The
// writing runs on a context of its own: a call that finished must be recorded
// even while the process is stopping.
func (pf *Performer) queueDecision(a db.Action, attemptID int64, out ledger.Outcome, d ledger.Decision) error {
	d.Reason = ledger.StorableText(d.Reason)
	p := pendingDecision{a: a, attemptID: attemptID, out: storable(out), d: d}
	if _, err := pf.decisions.Submit(context.Background(), p); err != nil {
		return fmt.Errorf("record outcome of action %d: %w", a.ID, err)
	}
	return nil
}

// storable keeps what a destination said within what Postgres stores: text without
// NUL bytes or invalid UTF-8, and a reply document re-encoded (a lone UTF-16
// surrogate escape becomes U+FFFD) and without the \u0000 escape that jsonb refuses
// (it is then not kept, and the detail says so). Otherwise an outcome the
// destination really produced could never be recorded.
func storable(out ledger.Outcome) ledger.Outcome {
	out.ExternalRef, out.Detail = ledger.StorableText(out.ExternalRef), ledger.StorableText(out.Detail)
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
func withoutResult(out ledger.Outcome) ledger.Outcome {
	out.Result = nil
	out.Detail = strings.TrimPrefix(out.Detail+"; the reply document was not kept: it holds text the database cannot store", "; ")
	return out
}

// recordTimeout bounds the writing of one group, its retries of storage included.
const recordTimeout = 15 * time.Second

// newRecorder returns the group writer of the outcomes. It has one writer: a
// second one's groups would contend with the first's for the same index pages,
// while a single writer's groups grow as it waits for a commit. While calls are in
// flight their outcomes are on their way, and a group waits for them (up to
// batch.GroupWait): the calls of one claim go out together and mostly answer
// within a millisecond or two of each other, and a group costs Postgres about as
// much as one decision (parsing, planning, its commit). It is never closed: a call
// abandoned after the grace period still records its outcome when it ends.
func (pf *Performer) newRecorder() *batch.Writer[pendingDecision, struct{}] {
	return batch.New(batch.Params[pendingDecision, struct{}]{
		Write:   pf.writeGroup,
		Split:   ledger.Splittable,
		Coming:  func() bool { return pf.callsInFlight() > 0 },
		Writers: 1,
		Timeout: recordTimeout,
	})
}

// callsInFlight is how many calls (and lookups) are in flight: the busy call slots.
func (pf *Performer) callsInFlight() int {
	n := pf.slots.Busy()
	for _, l := range pf.limits {
		n += l.slots.Busy()
	}
	return n
}

// pendingDecision is one decision waiting for its group's commit.
type pendingDecision struct {
	a         db.Action
	attemptID int64
	out       ledger.Outcome
	d         ledger.Decision
}

// writeGroup writes a group of decisions. One statement records the whole group,
// in a transaction whose statements keep their generic plans of lookups by key
// (see ActionRecordBatch), with the disconnection of a destination when a decision
// holds it. Storage trouble is retried briefly; if it persists, the leases expire
// and recovery makes the actions uncertain. Any other failure has the recorder
// write the group again decision by decision (see splittable), so that one
// decision the database refuses cannot refuse the others; a lone decision whose
// reply document the database refuses is recorded without it.
func (pf *Performer) writeGroup(ctx context.Context, group []pendingDecision) ([]batch.Result[struct{}], error) {
	recorded, err := pf.commitGroup(ctx, group)
	if _, refused := db.Refused(err); refused && len(group) == 1 && group[0].out.Result != nil {
		// The outcome still counts without the document.
		group[0].out = withoutResult(group[0].out)
		recorded, err = pf.commitGroup(ctx, group)
	}
	if err != nil {
		return nil, err
	}
	for _, p := range group {
		if !recorded[actionKey{p.a.Client, p.a.ID}] {
			pf.logger.Warn("lease lost before the outcome was recorded; the attempt keeps the evidence",
				tracing.ActionIDs(nil, p.a), "observed", string(p.out.Observed))
			continue
		}
		pf.logger.Debug("action outcome", tracing.ActionIDs(nil, p.a), "observed", string(p.out.Observed), "state", p.d.State)
	}
	return make([]batch.Result[struct{}], len(group)), nil
}

// commitGroup records the group in one transaction, retried while storage is
// unavailable, then wakes the performers if it made work due now. It returns the
// actions it recorded.
func (pf *Performer) commitGroup(ctx context.Context, group []pendingDecision) (map[actionKey]bool, error) {
	var recorded map[actionKey]bool
	var due bool
	err := retryStorage(ctx, func() error {
		return pf.store.InTx(ctx, pf.pool, store.Keyed, func(q *db.Queries) error {
			var err error
			recorded, due, err = pf.writeDecisions(ctx, q, group)
			return err
		})
	})
	if err == nil && due {
		pf.performers.Send() // after the commit: see newWakeup
	}
	return recorded, err
}

// recordParams is ActionRecordBatch's arguments for the group.
func (pf *Performer) recordParams(group []pendingDecision) db.ActionRecordBatchParams {
	rec := db.ActionRecordBatchParams{Worker: pf.p.Worker}
	for _, p := range group {
		rec.Clients = append(rec.Clients, p.a.Client)
		rec.Ids = append(rec.Ids, p.a.ID)
		rec.AttemptIds = append(rec.AttemptIds, p.attemptID)
		rec.Observed = append(rec.Observed, string(p.out.Observed))
		rec.HttpStatuses = append(rec.HttpStatuses, int32(p.out.HTTPStatus))
		rec.Errors = append(rec.Errors, ledger.Truncate(p.out.Detail, 1000))
		rec.States = append(rec.States, p.d.State)
		rec.Reasons = append(rec.Reasons, ledger.Truncate(p.d.Reason, 1000))
		rec.NextAttemptAts = append(rec.NextAttemptAts, p.d.NextAttemptAt)
		rec.ExternalRefs = append(rec.ExternalRefs, p.out.ExternalRef)
		rec.Results = append(rec.Results, string(p.out.Result))
		rec.Owners = append(rec.Owners, p.d.Owner)
		rec.LeaseTokens = append(rec.LeaseTokens, p.a.LeaseToken)
		rec.RowsDays = append(rec.RowsDays, p.a.RowsDay)
		back := int32(0)
		if p.d.GiveBack {
			back = 1
		}
		rec.AttemptsBack = append(rec.AttemptsBack, back)
	}
	return rec
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
func (pf *Performer) writeDecisions(ctx context.Context, q *db.Queries, group []pendingDecision) (map[actionKey]bool, bool, error) {
	rows, err := pf.store.RecordOutcomes(ctx, q, pf.recordParams(group))
	if err != nil {
		return nil, false, fmt.Errorf("record outcomes: %w", err)
	}
	recorded := make(map[actionKey]bool, len(rows))
	due := false
	for _, r := range rows {
		recorded[actionKey{r.Client, r.ID}] = true
		due = due || r.Released > 0
	}
	refused := map[string]pendingDecision{} // by destination, its latest claim
	for _, p := range group {
		if !recorded[actionKey{p.a.Client, p.a.ID}] {
			continue
		}
		switch p.d.State {
		case ledger.StateHeld:
			if r, ok := refused[p.a.Destination]; !ok || p.a.UpdatedAt.After(r.a.UpdatedAt) {
				refused[p.a.Destination] = p
			}
		case ledger.StateRetrying, ledger.StateUncertain:
			due = due || !p.d.NextAttemptAt.After(pf.now())
		}
	}
	for name, p := range refused {
		if err := pf.disconnect(ctx, q, name, p.out.Detail, p.a.UpdatedAt); err != nil {
			return nil, false, err
		}
	}
	return recorded, due, nil
}

// disconnect marks a destination whose credentials failed to a call claimed at
// calledAt and holds its waiting actions: no further calls until an admin
// reconnects it. A destination reconnected since is left as it is (see
// DestinationDisconnect).
func (pf *Performer) disconnect(ctx context.Context, q *db.Queries, name, detail string, calledAt time.Time) error {
	reason := "credentials refused: " + detail
	n, err := q.DestinationDisconnect(ctx, db.DestinationDisconnectParams{Name: name, Reason: ledger.Truncate(reason, 500), CalledAt: calledAt})
	if err != nil {
		return fmt.Errorf("mark destination disconnected: %w", err)
	}
	if n == 0 {
		return nil
	}
	hold := db.ActionHoldDestinationParams{
		Destination: name, Reason: "destination " + name + " is disconnected", States: ledger.HoldableStates,
	}
	if _, err := pf.store.HoldDestination(ctx, q, hold, pf.laneClients); err != nil {
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
		batch.Sleep(ctx, delay)
		delay = min(delay*2, 2*time.Second)
	}
}
