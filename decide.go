package oncehook

import (
	"fmt"
	"math/rand/v2"
	"time"
)

// Observation is what a worker saw. Each one is a row of the decision table.
type Observation string

// The rows of DESIGN.md section 3, in its order.
const (
	ObsSuccess          Observation = "2xx from destination"
	ObsAlreadyConfirmed Observation = "same operation already confirmed"
	ObsRejected         Observation = "rejected by the destination (4xx)"
	ObsUnauthorized     Observation = "credentials refused (401/403)"
	ObsInFlight         Observation = "same key in flight (409)"
	ObsThrottled        Observation = "throttled or not sent (429/503, refused before sending)"
	ObsUnsure           Observation = "unsure (timeout after sending, other 5xx, crash after the call)"
	ObsFound            Observation = "reconcile found the record"
	ObsAbsentStrong     Observation = "reconcile: strong lookup says absent"
	ObsKeyRemembered    Observation = "reconcile: no lookup, key still remembered by destination"
	ObsUnknowable       Observation = "reconcile: absent on an eventual lookup, or no way to know"
	ObsBudgetSpent      Observation = "attempts or elapsed budget spent"
	ObsLeaseNoAttempt   Observation = "lease expired, no attempt started"
	ObsLeaseStarted     Observation = "lease expired, attempt started but unrecorded"
)

// Rows of DESIGN.md section 4a: what a destination's own words and an eventual
// lookup's settle time add to the table.
const (
	ObsExists          Observation = "the destination says the record exists"
	ObsExistsNoLookup  Observation = "the destination says the record exists, and no lookup can find it"
	ObsAbsentUnsettled Observation = "reconcile: absent on an eventual lookup before settle"
	ObsAbsentSettled   Observation = "reconcile: absent on an eventual lookup after settle"
)

// Rule is one row of the decision table.
type Rule struct {
	Observed Observation
	Code     string // a short name for metrics labels and logs
	Next     string // the next state
	Keep     string // the record kept
}

// DecisionTable is the one place that says what each observation leads to. The
// pages show it and Decide applies it.
var DecisionTable = []Rule{
	{ObsSuccess, "success", StateConfirmed, "external record id, response status"},
	{ObsAlreadyConfirmed, "already_confirmed", StateConfirmed, "linking event"},
	{ObsRejected, "rejected", StateFailed, "provider reason"},
	{ObsUnauthorized, "unauthorized", StateHeld, "connection owner"},
	{ObsInFlight, "in_flight", StateRetrying, "attempt"},
	{ObsThrottled, "throttled", StateRetrying, "attempts, next eligible time"},
	{ObsUnsure, "unsure", StateUncertain, "original key and evidence"},
	{ObsFound, "found", StateConfirmed, "record id, how found"},
	{ObsAbsentStrong, "absent_strong", StateRetrying, "lookup evidence"},
	{ObsKeyRemembered, "key_remembered", StateRetrying, "key age"},
	{ObsUnknowable, "unknowable", StateFailed, "what remains unknown"},
	{ObsBudgetSpent, "budget_spent", StateFailed, "attempts, first/last time"},
	{ObsLeaseNoAttempt, "lease_no_attempt", StatePending, ""},
	{ObsLeaseStarted, "lease_started", StateUncertain, "the started attempt"},
	{ObsExists, "exists", StateUncertain, "the destination's words; reconcile by lookup"},
	{ObsExistsNoLookup, "exists_no_lookup", StateFailed, "the destination's words"},
	{ObsAbsentUnsettled, "absent_unsettled", StateUncertain, "lookup evidence; looks again once settle has passed"},
	{ObsAbsentSettled, "absent_settled", StateRetrying, "lookup evidence, settle"},
}

var ruleOf = func() map[Observation]Rule {
	m := make(map[Observation]Rule, len(DecisionTable))
	for _, r := range DecisionTable {
		m[r.Observed] = r
	}
	return m
}()

// Code is the observation's short name, for metrics labels.
func (o Observation) Code() string {
	if r, ok := ruleOf[o]; ok {
		return r.Code
	}
	return "unknown"
}

// RetryPlan is what the worker knows about an action's budget when it decides.
type RetryPlan struct {
	Attempts     int       // calls made so far, this one included
	MaxAttempts  int       // the attempts budget
	GiveUpAt     time.Time // the elapsed-time budget
	FirstAttempt time.Time
	Owner        string        // who is named when the budget is spent
	BackoffBase  time.Duration // the first retry's delay; doubles each attempt
	BackoffMax   time.Duration
}

// Decision is the outcome of Decide: the next state and why.
type Decision struct {
	State         string
	Reason        string
	NextAttemptAt time.Time
	Owner         string // set when the decision names a person
	Rule          Rule
}

// Decide applies the decision table to one observation. detail is the destination's
// own words (or the worker's); retryAfter is the destination's Retry-After, if any.
// A decision to retry becomes "budget spent" when the attempts or the elapsed time
// are used up, with the owner named.
func Decide(obs Observation, plan RetryPlan, detail string, retryAfter time.Duration, now time.Time) Decision {
	rule, ok := ruleOf[obs]
	if !ok {
		// An observation outside the table is a program error; the safe answer is a person.
		rule = ruleOf[ObsUnknowable]
		detail = fmt.Sprintf("unrecognised observation %q: %s", obs, detail)
	}
	d := Decision{State: rule.Next, Rule: rule, NextAttemptAt: now, Reason: reasonText(obs, detail)}
	switch d.State {
	case StateRetrying:
		wait := max(Backoff(plan.Attempts, plan.BackoffBase, plan.BackoffMax), retryAfter)
		d.NextAttemptAt = now.Add(wait)
		if plan.Attempts >= plan.MaxAttempts || d.NextAttemptAt.After(plan.GiveUpAt) {
			spent := ruleOf[ObsBudgetSpent]
			d.State, d.Rule, d.NextAttemptAt, d.Owner = spent.Next, spent, now, plan.Owner
			d.Reason = fmt.Sprintf("gave up after %d attempts (first %s, last %s): %s; owner %s",
				plan.Attempts, plan.FirstAttempt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339),
				reasonText(obs, detail), ownerOrNobody(plan.Owner))
		}
	case StateUncertain:
		// An eventual lookup that has not settled looks again when it has.
		d.NextAttemptAt = now.Add(retryAfter)
	case StateFailed:
		d.Owner = plan.Owner
		if obs == ObsUnknowable {
			d.Reason = "outcome unknown: " + detail
		}
	}
	return d
}

func reasonText(obs Observation, detail string) string {
	if detail == "" {
		return string(obs)
	}
	return string(obs) + ": " + detail
}

func ownerOrNobody(owner string) string {
	if owner == "" {
		return "(none configured)"
	}
	return owner
}

// Backoff is the delay before retry number attempt (1-based): exponential from base,
// capped at max, with jitter over its upper half so that many actions failing
// together do not come back together.
func Backoff(attempt int, base, maxDelay time.Duration) time.Duration {
	if base <= 0 {
		base = 2 * time.Second
	}
	if maxDelay <= 0 {
		maxDelay = time.Hour
	}
	d := base
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	half := d / 2
	return half + rand.N(half+1)
}

// NextStep is what the pages propose for an action in a state: the decision
// table read from the person's side.
func NextStep(state string) string {
	switch state {
	case StatePending:
		return "Wait: a worker will perform it."
	case StateProcessing:
		return "Wait: a worker is performing it now."
	case StateRetrying:
		return "Wait: the worker retries with the same key at the next eligible time."
	case StateHeld:
		return "Reconnect the destination; its held actions then run."
	case StateUncertain:
		return "Reconcile: look the operation up at the destination before any repeat."
	case StateFailed:
		return "Check the reason, then Retry with the same key, Resolve with evidence, or Cancel."
	case StateConfirmed:
		return "Nothing: the destination confirmed it."
	case StateResolved:
		return "Nothing: closed by a person."
	case StateCancelled:
		return "Nothing: it will not be performed."
	}
	return ""
}
