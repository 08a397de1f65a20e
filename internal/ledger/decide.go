package ledger

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/oncehook/oncehook/internal/settings"
)

// Observation is what a worker saw. Each one is a row of the decision table.
type Observation string

// The rows of the decision table (docs/how-it-works.md), in its order: each
// observation a worker or a person can make, so that no state is decided outside
// this table.
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
	ObsLookupFailed     Observation = "reconcile: the lookup failed"
	ObsBudgetSpent      Observation = "attempts or elapsed budget spent"
	ObsLeaseNoAttempt   Observation = "lease expired, no attempt started"
	ObsLeaseStarted     Observation = "lease expired, attempt started but unrecorded"
	ObsLeaseReconcile   Observation = "lease expired during a reconcile"
	ObsConflict         Observation = "conflict: a new event asks for the operation with different params"
)

// Rows of docs/destinations.md: what a destination's own words and an eventual
// lookup's settle time add to the table.
const (
	ObsExists          Observation = "the destination says the record exists"
	ObsExistsNoLookup  Observation = "the destination says the record exists, and no lookup can find it"
	ObsAbsentUnsettled Observation = "reconcile: absent on an eventual lookup before settle"
	ObsAbsentSettled   Observation = "reconcile: absent on an eventual lookup after settle"
	// The opt-in of settle: {after, then: retry}: the destination's owner accepts
	// that a record slower than settle to appear is created twice.
	ObsAbsentSettledRetry Observation = "reconcile: absent on an eventual lookup after settle, where the destination opts in to a repeat"
)

// The rows of a person's Retry (the decision table, "a manual retry reuses the
// operation key"): performed with the same key, or looked up first.
const (
	ObsRetryByPerson    Observation = "a person retries with the same key"
	ObsRetryLookupFirst Observation = "a person retries after the key memory passed; a lookup exists"
)

// The rows of a new action (the decision table, 401/403: "its other actions wait
// too"): ready to run, or held while its destination is disconnected.
const (
	ObsCreated             Observation = "created for an event"
	ObsCreatedDisconnected Observation = "created while its destination is disconnected"
	// A param the event cannot fill (a money amount whose currency is unknown) is
	// never sent as null: a person corrects the request first.
	ObsUnfillable Observation = "a param the event cannot fill"
	// The rows of a cutover (docs/cutover.md): an earlier system may have done
	// what the event asks, so the operation is looked up before any create, or,
	// where no lookup can tell, a person decides first.
	ObsCreatedInCutover         Observation = "created in a cutover window: looked up before any create"
	ObsCreatedInCutoverNoLookup Observation = "created in a cutover window, and no lookup can tell whether the earlier system did it"
)

// The row of a person's correction (the decision table, "a person corrects a
// rejected request (and another approves, where required)"): performed with the
// corrected params once approved. A refused correction observes nothing new: the
// action stays failed with the provider's reason.
const ObsCorrectionApproved Observation = "a person corrected the rejected request and it was approved"

// Rule is one row of the decision table.
type Rule struct {
	Observed Observation
	Code     string // a short name for metrics labels and logs
	Next     string // the next state
	Keep     string // the record kept
	// Wait: the next try waits a backoff (at least Retry-After), and gives up,
	// naming the owner, once the budget is spent: the elapsed time always, the
	// attempts when the next try is a call (a retry).
	Wait bool
}

// DecisionTable is the one place that says what each observation leads to. The
// pages show it and Decide applies it. A row added here needs its case in
// TestDecide, which fails for a row without one.
var DecisionTable = []Rule{
	{ObsSuccess, "success", StateConfirmed, "external record id, response status", false},
	{ObsAlreadyConfirmed, "already_confirmed", StateConfirmed, "linking event", false},
	{ObsRejected, "rejected", StateFailed, "provider reason", false},
	{ObsUnauthorized, "unauthorized", StateHeld, "connection owner", false},
	{ObsInFlight, "in_flight", StateRetrying, "attempt", true},
	{ObsThrottled, "throttled", StateRetrying, "attempts, next eligible time", true},
	{ObsUnsure, "unsure", StateUncertain, "original key and evidence", false},
	{ObsFound, "found", StateConfirmed, "record id, how found", false},
	{ObsAbsentStrong, "absent_strong", StateRetrying, "lookup evidence", true},
	{ObsKeyRemembered, "key_remembered", StateRetrying, "key age", true},
	{ObsUnknowable, "unknowable", StateFailed, "what remains unknown", false},
	{ObsLookupFailed, "lookup_failed", StateUncertain, "the failed lookup; looks again later", true},
	{ObsBudgetSpent, "budget_spent", StateFailed, "attempts, first/last time", false},
	{ObsLeaseNoAttempt, "lease_no_attempt", StatePending, "", false},
	{ObsLeaseStarted, "lease_started", StateUncertain, "the started attempt", false},
	{ObsLeaseReconcile, "lease_reconcile", StateUncertain, "the started lookup, if any", false},
	{ObsConflict, "conflict", StateFailed, "both events' params", false},
	{ObsExists, "exists", StateUncertain, "the destination's words; reconcile by lookup", false},
	{ObsExistsNoLookup, "exists_no_lookup", StateFailed, "the destination's words", false},
	{ObsAbsentUnsettled, "absent_unsettled", StateUncertain, "lookup evidence; looks again once settle has passed", true},
	{ObsAbsentSettled, "absent_settled", StateFailed, "lookup evidence, settle; a Retry the person confirms", false},
	{ObsAbsentSettledRetry, "absent_settled_retry", StateRetrying, "lookup evidence, settle", true},
	{ObsRetryByPerson, "retry_by_person", StatePending, "who retried, and what they checked", false},
	{ObsRetryLookupFirst, "retry_lookup_first", StateUncertain, "who retried; the operation is looked up before any call", false},
	{ObsCreated, "created", StatePending, "the event that asked for it", false},
	{ObsCreatedDisconnected, "created_held", StateHeld, "the disconnected destination", false},
	{ObsUnfillable, "unfillable", StateFailed, "the param and what the event holds", false},
	{ObsCreatedInCutover, "created_cutover", StateUncertain, "the cutover window; the lookup's answer", false},
	{ObsCreatedInCutoverNoLookup, "created_cutover_no_lookup", StateFailed, "the cutover window; a person checks the destination", false},

	{ObsCorrectionApproved, "correction_approved", StatePending, "the provider reason and the approved correction: the original request, the corrected one, who made and who approved it", false},
}

var RuleOf = func() map[Observation]Rule {
	m := make(map[Observation]Rule, len(DecisionTable))
	for _, r := range DecisionTable {
		m[r.Observed] = r
	}
	return m
}()

// ObserveStatus is the default classification of a destination's reply by its
// status, before the destination's own errors rules: 2xx success; 401/403
// credentials refused; 409 the same key in flight; 429/503 throttled; other 4xx
// rejected; anything else (other 5xx, redirects the configured URL should not
// produce) unsure, since the destination may have acted.
func ObserveStatus(status int) Observation {
	switch {
	case status >= 200 && status < 300:
		return ObsSuccess
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return ObsUnauthorized
	case status == http.StatusConflict:
		return ObsInFlight
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		return ObsThrottled
	case status >= 400 && status < 500:
		return ObsRejected
	}
	return ObsUnsure
}

// ObserveMeaning is the observation an errors rule's meaning stands for
// (docs/destinations.md, "Recipes"). "exists" is reconciled by the lookup; without one nothing can find
// the record, and a person decides. An unknown meaning is unsure.
func ObserveMeaning(m string, hasLookup bool) Observation {
	switch m {
	case settings.MeansRejected:
		return ObsRejected
	case settings.MeansRateLimited, settings.MeansUnavailable:
		return ObsThrottled
	case settings.MeansUnauthorized:
		return ObsUnauthorized
	case settings.MeansExists:
		if !hasLookup {
			return ObsExistsNoLookup
		}
		return ObsExists
	}
	return ObsUnsure
}

// Repeats reports whether the meaning m leads, by the table, to the call being made
// again without a lookup first: retried, or held and then released.
func Repeats(m string) bool {
	next := RuleOf[ObserveMeaning(m, true)].Next
	return next == StateRetrying || next == StateHeld
}

// MayHavePerformed reports whether a reply with this status may come after the
// destination acted: one the table reads by default as confirmed or uncertain.
// Only replies that say nothing was done may be read as a reason to call again.
func MayHavePerformed(status int) bool {
	next := RuleOf[ObserveStatus(status)].Next
	return next == StateConfirmed || next == StateUncertain
}

// ManualRetry is what a person's Retry observes about the destination: the same key
// may be sent while the destination remembers it (since the first attempt at
// first), or when the person checked the destination; past the key memory, a
// lookup whose absence the table acts on (strong, or eventual with the settle
// opt-in to a repeat) comes first. An eventual lookup without the opt-in proves
// nothing, so the person confirms. ok is false when neither holds: a retry could
// act twice, and is refused.
func ManualRetry(caps Capabilities, first time.Time, checked bool, now time.Time) (obs Observation, ok bool) {
	switch {
	case caps.KeyRemembered(first, now), checked:
		return ObsRetryByPerson, true
	case caps.Lookup && (caps.StrongLookup || caps.SettleRetry):
		return ObsRetryLookupFirst, true
	}
	return "", false
}

// DecideCorrection is the table's answer to an approved correction.
func DecideCorrection(plan RetryPlan, detail string, now time.Time) Decision {
	return Decide(ObsCorrectionApproved, plan, detail, 0, now)
}

// CorrectionNeedsNewKey reports whether a corrected request must go under a new
// attempt identity: a destination that remembers keys answers a repeat of a key it
// still remembers with the answer it kept, the rejection included, so the same key
// would only replay the refusal. The rejection performed nothing, so a new key
// cannot act twice.
func CorrectionNeedsNewKey(caps Capabilities, first *time.Time, now time.Time) bool {
	return first != nil && caps.KeyRemembered(*first, now)
}

// Code is the observation's short name, for metrics labels.
func (o Observation) Code() string {
	if r, ok := RuleOf[o]; ok {
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
	Owner        string // who is named when the budget is spent
	// Parked: the destination's breaker is open. An outage spends no budget: the
	// action waits, parked, and is never failed by it.
	Parked      bool
	BackoffBase time.Duration // the first retry's delay; doubles each attempt
	BackoffMax  time.Duration
	// Jitter picks the random part of a backoff, in [0, n]; nil is uniform. Tests
	// fix it to compare whole decisions.
	Jitter func(n time.Duration) time.Duration
}

// Decision is the outcome of Decide: the next state and why.
type Decision struct {
	State         string
	Reason        string
	NextAttemptAt time.Time
	Owner         string // set when the decision names a person
	Rule          Rule
	// GiveBack: the attempt the claim counted is not spent (DecideOutcome).
	GiveBack bool
}

// Decide applies the decision table to one observation. detail is the destination's
// own words (or the worker's); retryAfter is the destination's Retry-After, if any.
// A row that waits (Rule.Wait) becomes "budget spent" when the attempts or the
// elapsed time are used up, with the owner named.
func Decide(obs Observation, plan RetryPlan, detail string, retryAfter time.Duration, now time.Time) Decision {
	rule, ok := RuleOf[obs]
	if !ok {
		// An observation outside the table is a program error; the safe answer is a person.
		rule = RuleOf[ObsUnknowable]
		detail = fmt.Sprintf("unrecognised observation %q: %s", obs, detail)
	}
	d := Decision{State: rule.Next, Rule: rule, NextAttemptAt: now, Reason: reasonText(obs, detail)}
	if rule.Wait {
		wait := max(backoff(plan.Attempts, plan.BackoffBase, plan.BackoffMax, plan.Jitter), retryAfter)
		d.NextAttemptAt = now.Add(wait)
		attemptsSpent := rule.Next == StateRetrying && plan.Attempts >= plan.MaxAttempts
		if (attemptsSpent || d.NextAttemptAt.After(plan.GiveUpAt)) && !plan.Parked {
			spent := RuleOf[ObsBudgetSpent]
			d.State, d.Rule, d.NextAttemptAt = spent.Next, spent, now
			d.Reason = fmt.Sprintf("gave up after %d attempts (first %s, last %s): %s; owner %s",
				plan.Attempts, plan.FirstAttempt.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339),
				reasonText(obs, detail), ownerOrNobody(plan.Owner))
		}
	}
	if d.State == StateFailed {
		d.Owner = plan.Owner
		if d.Rule.Observed == ObsUnknowable {
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

// backoff is the delay before retry number attempt (1-based): exponential from base,
// capped at max (both positive: NewEngine gives the defaults), with jitter over its
// upper half so that many actions failing together do not come back together.
// jitter picks the random part; nil is uniform.
func backoff(attempt int, base, maxDelay time.Duration, jitter func(time.Duration) time.Duration) time.Duration {
	if jitter == nil {
		jitter = func(n time.Duration) time.Duration { return rand.N(n + 1) }
	}
	d := base
	for i := 1; i < attempt && d < maxDelay; i++ {
		d *= 2
	}
	d = min(d, maxDelay)
	half := d / 2
	return half + jitter(half)
}
