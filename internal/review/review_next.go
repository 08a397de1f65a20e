package review

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// Step is what happens next to an action, read from the ledger: its state, its
// predecessor, its destination's connection and its schedule. The action page,
// the queue rows and the JSON API all show this one value.
type Step struct {
	Text string
	// Short is the step as a row of a queue says it: one short sentence, specific
	// to what holds the action (the field a destination refused, the Message-ID
	// to look for), the long explanation staying in Text for the action's page.
	Short string
	// Act is what Short asks a person to do, offered on the row: an act's name
	// (ActRetry, ActReconcile, ActResolve, ActCancel), ActCorrect, ActDecide or
	// ActReconnect; "" when nothing is for a person to do.
	Act string
	// NextAttempt is when a worker acts on it by itself; nil when nothing is
	// scheduled (a person must act, or it waits for a predecessor or a reconnect).
	NextAttempt *time.Time
	// BlockedBy is the predecessor it waits for, when that one is not done.
	BlockedBy *ledger.Action
	// HeldFor is the disconnected destination it waits for.
	HeldFor string
	// ParkedBy is the destination whose open breaker parks it.
	ParkedBy string
}

// StepFacts is what NextStepOf reads beside the action itself.
type StepFacts struct {
	Predecessor  *ledger.Action     // the action it runs after, if any
	Disconnected *DestinationStatus // its destination, when disconnected
	Breaker      *ledger.Breaker    // its destination's breaker, when it parks its actions
	Correction   *Correction        // a correction waiting for approval, if any
	Unconfigured bool               // its client is no longer in the config
	Evidence     []ledger.Evidence  // what to look for at its destination by hand (Review.Evidence)
	Now          time.Time
}

// The steps a row offers beside the manual acts: correcting the request (on
// the action's page) and reconnecting its destination (on the destinations page).
const (
	ActCorrect   = "correct"
	ActDecide    = "decide-correction" // approve or refuse a correction waiting for it
	ActReconnect = "reconnect"
)

// waitsBehindPredecessor reports whether a is parked until its predecessor is done.
func waitsBehindPredecessor(a ledger.Action, pred *ledger.Action) bool {
	if pred == nil || a.AfterID == nil || ledger.Scheduled(a.NextAttemptAt) {
		return false
	}
	return a.State == ledger.StatePending || a.State == ledger.StateRetrying || a.State == ledger.StateHeld
}

// waitsForUnconfigured reports whether an action in state, of a client no longer
// in the config, waits for a person because of that: one held (nobody will
// reconnect for it) or failed (nobody will correct it) is closed by hand. The
// next step and the queue's causes both read it.
func waitsForUnconfigured(state string) bool {
	return slices.Contains(ledger.UnconfiguredWaitStates, state)
}

// NextStepOf says what happens next to a, given the facts around it: the long
// sentence and, for a queue's row, the short one with its act (shortStep).
func NextStepOf(a ledger.Action, f StepFacts) Step {
	s := longStep(a, f)
	s.Short, s.Act = shortStep(a, f, s)
	return s
}

// longStep is NextStepOf's sentence for the action's page.
func longStep(a ledger.Action, f StepFacts) Step {
	switch a.State {
	case ledger.StateConfirmed:
		return Step{Text: "Nothing: the destination confirmed it."}
	case ledger.StateResolved:
		return Step{Text: "Nothing: closed by a person."}
	case ledger.StateCancelled:
		return Step{Text: "Nothing: it will not be performed."}
	case ledger.StateProcessing:
		return Step{Text: "Wait: a worker is performing it now."}
	}
	if f.Unconfigured && waitsForUnconfigured(a.State) {
		return Step{Text: "Its client is no longer configured: Cancel it, or Resolve it if it was done another way."}
	}
	if waitsBehindPredecessor(a, f.Predecessor) {
		return blockedStep(*f.Predecessor)
	}
	if b := f.Breaker; b != nil && slices.Contains(ledger.DueStates, a.State) {
		return parkedStep(a, *b)
	}
	if d := f.Disconnected; d != nil && a.State != ledger.StateFailed {
		return Step{HeldFor: d.Name, Text: fmt.Sprintf("Nothing is scheduled: it waits until %s reconnects %s; "+
			"then a worker %s.", reconnector(*d), d.Name, resumeWords(a.State))}
	}
	return scheduledStep(a, f)
}

// parkedStep is the step of an action its destination's open breaker parks.
func parkedStep(a ledger.Action, b ledger.Breaker) Step {
	text := "Parked: " + breakerWords(b)
	if b.Reason != "" {
		text += " (" + b.Reason + ")"
	}
	return Step{ParkedBy: b.Destination, Text: text + ". It stays " + a.State + " and spends none of its budget; " +
		"once a probe finds " + b.Destination + " well, a worker " + resumeWords(a.State) + ", oldest first."}
}

// blockedStep is the step of an action waiting for a predecessor that is not done.
func blockedStep(p ledger.Action) Step {
	what := fmt.Sprintf("Blocked: it waits for %s (action %d), which is %s", p.Name, p.ID, p.State)
	switch p.State {
	case ledger.StateFailed:
		what += "; nothing happens until a person retries, corrects or resolves that one"
	case ledger.StateUncertain:
		what += "; that one must be reconciled first"
	case ledger.StateHeld:
		what += "; that one waits for its destination to be reconnected"
	default:
		what += "; it runs once that one is confirmed"
	}
	return Step{Text: what + ".", BlockedBy: &p}
}

// scheduledStep is the step of an open action that nothing blocks.
func scheduledStep(a ledger.Action, f StepFacts) Step {
	var at *time.Time
	if t, ok := a.NextAttempt(); ok {
		at = &t
	}
	when := "shortly"
	if at != nil && at.After(f.Now) {
		when = "at " + at.UTC().Format("2006-01-02 15:04:05 UTC")
	}
	switch a.State {
	case ledger.StatePending:
		return Step{Text: "Wait: a worker will perform it " + when + ".", NextAttempt: at}
	case ledger.StateRetrying:
		if strings.HasPrefix(a.Reason, string(ledger.ObsThrottled)) && when != "shortly" {
			return Step{Text: fmt.Sprintf("Wait: %s asked to slow down (rate limit); the worker retries with the same key %s.",
				a.Destination, when), NextAttempt: at}
		}
		return Step{Text: "Wait: the worker retries with the same key " + when + ".", NextAttempt: at}
	case ledger.StateHeld:
		return Step{Text: "Nothing is scheduled: reconnect " + a.Destination + "; its held actions then run."}
	case ledger.StateUncertain:
		if at == nil {
			return Step{Text: "Reconcile: look the operation up at the destination before any repeat."}
		}
		return Step{Text: "Wait: a worker looks the operation up at " + a.Destination + " " + when +
			", before any repeat; or Reconcile now.", NextAttempt: at}
	case ledger.StateFailed:
		if c := f.Correction; c != nil {
			return Step{Text: fmt.Sprintf("Nothing is scheduled: %s proposed a correction; %s approves or refuses it, "+
				"and only then is it performed.", c.ProposedBy, c.approverWords())}
		}
		return Step{Text: "Nothing is scheduled: check the reason, then Retry with the same key, Correct the request " +
			"if the destination rejected it, Resolve with evidence, or Cancel."}
	}
	return Step{}
}

// reconnector names who can reconnect d.
func reconnector(d DestinationStatus) string {
	if d.Owner != "" {
		return "an admin (or " + d.Owner + ")"
	}
	return "an admin"
}

// resumeWords is what a worker does with an action of state once its destination is back.
func resumeWords(state string) string {
	if state == ledger.StateUncertain {
		return "looks the operation up before any repeat"
	}
	return "performs it"
}

// NextSteps computes the step of each action, reading the predecessors and the
// destinations' connections they need in one go.
func (r *Review) NextSteps(ctx context.Context, as []ledger.Action) (map[int64]Step, error) {
	dests, err := r.Destinations(ctx)
	if err != nil {
		return nil, err
	}
	down := map[string]*DestinationStatus{}
	parked := map[string]*ledger.Breaker{}
	for i := range dests {
		if dests[i].Status == "disconnected" {
			down[dests[i].Name] = &dests[i]
		}
		if dests[i].Breaker.Parks() {
			parked[dests[i].Name] = &dests[i].Breaker
		}
	}
	preds := map[int64]*ledger.Action{}
	q := db.New(r.pool)
	for _, a := range as {
		if a.AfterID == nil || ledger.Scheduled(a.NextAttemptAt) || preds[*a.AfterID] != nil {
			continue
		}
		row, err := q.ActionGetByKey(ctx, db.ActionGetByKeyParams{Client: a.Client, ID: *a.AfterID})
		if err != nil && !db.IsNotFound(err) {
			return nil, fmt.Errorf("read predecessor: %w", err)
		}
		if err == nil {
			p := ledger.ActionOf(row)
			preds[p.ID] = &p
		}
	}
	corrections, err := r.openCorrections(ctx, as)
	if err != nil {
		return nil, err
	}
	out := make(map[int64]Step, len(as))
	now := r.now()
	configured := r.cfg.Clients()
	for _, a := range as {
		f := StepFacts{Disconnected: down[a.Destination], Breaker: parked[a.Destination], Correction: corrections[a.ID], Now: now,
			Unconfigured: !slices.Contains(configured, a.Client), Evidence: r.Evidence(a)}
		if a.AfterID != nil {
			f.Predecessor = preds[*a.AfterID]
		}
		out[a.ID] = NextStepOf(a, f)
	}
	return out, nil
}

// NextStep computes the step of one action.
func (r *Review) NextStep(ctx context.Context, a ledger.Action) (Step, error) {
	steps, err := r.NextSteps(ctx, []ledger.Action{a})
	return steps[a.ID], err
}

// OutstandingWords says who has the outstanding queue: the workers, except the
// actions held until a named person reconnects a named destination.
func (r *Review) OutstandingWords(ctx context.Context) (string, error) {
	dests, err := r.Destinations(ctx)
	if err != nil {
		return "", err
	}
	var held []string
	for _, d := range dests {
		if d.Held > 0 {
			held = append(held, fmt.Sprintf("%d held until %s reconnects %s", d.Held, reconnector(d), d.Name))
		}
	}
	slices.Sort(held)
	if len(held) == 0 {
		return "Workers perform these by themselves; some wait for a predecessor or a retry time, as each row says.", nil
	}
	return "Not all of these are the workers': " + strings.Join(held, "; ") +
		". The rest wait for a worker, a predecessor or a retry time, as each row says.", nil
}

// shortStep is step as a queue's row says it, with the act it asks for: for an
// action that waits for a person, its cause's fix (the words of the queue's
// cause list, failedCauseWords, made specific to the action); for one the
// workers have, the long sentence's first clause.
func shortStep(a ledger.Action, f StepFacts, step Step) (short, act string) {
	d := a.Destination
	switch {
	case a.State == ledger.StateConfirmed || a.State == ledger.StateResolved || a.State == ledger.StateCancelled ||
		a.State == ledger.StateProcessing:
		return step.Text, ""
	case f.Unconfigured && waitsForUnconfigured(a.State):
		return "Its client is gone: Cancel it, or Resolve it if done another way.", ActCancel
	case step.BlockedBy != nil:
		return fmt.Sprintf("Deal with %s (action %d) first.", step.BlockedBy.Name, step.BlockedBy.ID), ""
	case step.ParkedBy != "":
		return "Parked: " + d + " is down; a probe releases it.", ""
	case step.HeldFor != "" || a.State == ledger.StateHeld:
		return "Reconnect " + d + "; it then runs.", ActReconnect
	case a.State == ledger.StateUncertain:
		if step.NextAttempt != nil {
			return "Wait: it is looked up at " + d + " first; or Reconcile now.", ActReconcile
		}
		return "Reconcile: look it up at " + d + " before any repeat.", ActReconcile
	case a.State != ledger.StateFailed:
		first, _, _ := strings.Cut(step.Text, ";")
		return strings.TrimSuffix(first, ".") + ".", ""
	case f.Correction != nil:
		return "Approve or refuse the correction " + f.Correction.ProposedBy + " proposed.", ActDecide
	}
	cause := causeOf(a.Reason)
	_, fix := failedCauseWords(d, cause)
	switch cause {
	case string(ledger.ObsRejected), string(ledger.ObsUnfillable):
		if field := NamedField(a.Reason, a.Params); field != "" {
			return "Correct " + field + ", then Retry.", ActCorrect
		}
		return fix + ".", ActCorrect
	case causeOutcomeUnknown, string(ledger.ObsUnknowable), string(ledger.ObsExistsNoLookup):
		for _, e := range f.Evidence {
			if e.Value != "" {
				return fmt.Sprintf("Look for %s %s at %s, then Resolve or Retry.", e.Label, e.Value, d), ActResolve
			}
		}
		return fix + ".", ActResolve
	case string(ledger.ObsConflict):
		return fix + ".", ActResolve
	}
	return fix + ".", ActRetry
}
