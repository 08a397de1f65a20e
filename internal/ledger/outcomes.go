package ledger

import (
	"fmt"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/settings"
)

// LookupOutcome is the observation a lookup's answer about a makes at now. A failed
// lookup proves nothing: the table keeps the action uncertain and looks again later.
func LookupOutcome(a db.Action, r LookupResult, caps Capabilities, now time.Time) Outcome {
	out := Outcome{HTTPStatus: r.HTTPStatus, Detail: r.Detail}
	switch {
	case r.Unsure:
		out.Observed = ObsLookupFailed
	case r.Found:
		out.Observed, out.ExternalRef, out.Result = ObsFound, r.ExternalRef, r.Result
		out.Detail = "found by lookup"
	case caps.StrongLookup:
		out.Observed = ObsAbsentStrong
		out.Detail = "a strong lookup found no record with this key; retrying with the same key"
	default:
		out = EventualAbsence(a, caps, now, out)
	}
	return out
}

// EventualAbsence is what an eventual lookup's "absent" means: nothing, unless the
// destination's settle time has passed since the last call; before then it looks
// again once it has. Past it, no index promises to have caught up, so the absence
// goes to the owner with the lookup's answer, and repeats the call only where the
// destination opts in (settle: {after, then: retry}).
func EventualAbsence(a db.Action, caps Capabilities, now time.Time, out Outcome) Outcome {
	if caps.Settle <= 0 {
		out.Observed = ObsUnknowable
		out.Detail = "an eventual lookup found no record, which does not prove it was never created"
		return out
	}
	since := caps.Settle // no call recorded: nothing to wait for
	if a.LastAttemptAt != nil {
		since = now.Sub(*a.LastAttemptAt)
	}
	if since < caps.Settle {
		out.Observed, out.RetryAfter = ObsAbsentUnsettled, caps.Settle-since
		out.Detail = fmt.Sprintf("an eventual lookup found no record %s after the call; it settles after %s, so it looks again then",
			since.Round(time.Second), caps.Settle)
		return out
	}
	evidence := out.Detail
	if evidence == "" {
		evidence = "no record with this reference"
	}
	if caps.SettleRetry {
		out.Observed = ObsAbsentSettledRetry
		out.Detail = fmt.Sprintf("an eventual lookup found no record %s after the call, past its settle time of %s (lookup: %s); retrying with the same key, as the destination opts in",
			since.Round(time.Second), caps.Settle, evidence)
		return out
	}
	out.Observed = ObsAbsentSettled
	out.Detail = fmt.Sprintf("not found %s after the call; the index may lag (lookup: %s). "+
		"Check the destination: Resolve with the record you find, or Retry confirming it is not there",
		aboutMinutes(since), evidence)
	return out
}

// aboutMinutes is d for people: whole minutes, or seconds under a minute.
func aboutMinutes(d time.Duration) string {
	switch m := int(d / time.Minute); {
	case d < time.Minute:
		return fmt.Sprintf("%d seconds", int(d/time.Second))
	case m == 1:
		return "1 minute"
	default:
		return fmt.Sprintf("%d minutes", m)
	}
}

// ReconcileWithoutLookup relies on the destination's key memory while it lasts.
func ReconcileWithoutLookup(a db.Action, caps Capabilities, now time.Time) Outcome {
	if caps.KeyMemory > 0 && a.FirstAttemptAt != nil {
		age := now.Sub(*a.FirstAttemptAt)
		if caps.KeyRemembered(*a.FirstAttemptAt, now) {
			return Outcome{Observed: ObsKeyRemembered, Detail: fmt.Sprintf(
				"the key is %s old and the destination remembers keys for %s; retrying with the same key",
				age.Round(time.Second), caps.KeyMemory)}
		}
		return Outcome{Observed: ObsUnknowable, Detail: fmt.Sprintf(
			"no lookup exists and the destination's key memory (%s) has passed", caps.KeyMemory)}
	}
	if caps.KeyMemory > 0 { // never called: nothing can have happened
		return Outcome{Observed: ObsKeyRemembered, Detail: "no call was made yet"}
	}
	return Outcome{Observed: ObsUnknowable, Detail: "the destination offers no lookup and no key memory; check it by hand"}
}

// LeaseDecision is the decision table's answer to an expired lease.
func LeaseDecision(a db.Action, callStarted bool, plan RetryPlan, now time.Time) Decision {
	obs, detail := leaseObservation(a, callStarted)
	return Decide(obs, plan, detail, 0, now)
}

// leaseObservation is the row of the decision table an expired lease is: a call
// started under it may have reached the destination; a claim made to reconcile
// (claimed from uncertain) still does not know the earlier call's outcome; any
// other claim never called anyone and is safe to run.
func leaseObservation(a db.Action, callStarted bool) (Observation, string) {
	worker := "a worker"
	if a.LeaseOwner != nil {
		worker = "worker " + *a.LeaseOwner
	}
	switch {
	case callStarted:
		return ObsLeaseStarted, worker + " stopped after starting the call; reconcile before any repeat"
	case a.ClaimedFrom == StateUncertain:
		return ObsLeaseReconcile, worker + " stopped while reconciling; reconcile again"
	default:
		return ObsLeaseNoAttempt, worker + " stopped before calling anyone; safe to run"
	}
}

// DecideOutcome is the decision table's answer to what a call or a lookup observed.
func DecideOutcome(out Outcome, plan RetryPlan, now time.Time) Decision {
	d := Decide(out.Observed, plan, out.Detail, out.RetryAfter, now)
	// An outage spends no budget: a call its claim counted but that stayed here
	// because the destination's breaker opened gives its attempt back.
	d.GiveBack = out.NotSent && plan.Parked
	return d
}

// AlreadyConfirmed is the decision table's answer to an event asking for an
// operation that is already confirmed.
func AlreadyConfirmed(a db.Action, now time.Time) Decision {
	return Decide(ObsAlreadyConfirmed, RetryPlan{}, fmt.Sprintf("action %d, linked to this event", a.ID), 0, now)
}

// Unfillable is the decision table's answer to an action just created whose params
// the event cannot fill: problems says which param and why.
func Unfillable(owner, problems string, now time.Time) Decision {
	return Decide(ObsUnfillable, RetryPlan{Owner: owner}, problems, 0, now)
}

// CreatedInCutover is the decision table's answer to an action created for an
// event a cutover window covers: looked up before any create where the
// destination has a lookup (lookup), else sent to a person (owner) first.
func CreatedInCutover(c settings.Cutover, lookup bool, owner string, now time.Time) Decision {
	window := "cutover from " + c.From.UTC().Format(time.RFC3339) + " until " + c.Until.UTC().Format(time.RFC3339)
	if lookup {
		return Decide(ObsCreatedInCutover, RetryPlan{Owner: owner}, window, 0, now)
	}
	return Decide(ObsCreatedInCutoverNoLookup, RetryPlan{Owner: owner},
		window+": check the destination for what the earlier system did, then Resolve, or Retry confirming you checked", 0, now)
}

// Conflicting is the decision table's answer to an event asking for an existing
// operation with different params.
func Conflicting(a db.Action, ev db.Event, now time.Time) Decision {
	return Decide(ObsConflict, RetryPlan{Owner: a.Owner}, fmt.Sprintf("event %d (%s)", ev.ID, ev.SourceEventID), 0, now)
}
