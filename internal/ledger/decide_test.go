package ledger

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestDecide compares, for every row of the decision table, the whole decision the
// production code gets: each case builds its observation the way production does
// (a destination's Outcome through decideOutcome, a lookup through lookupOutcome,
// reconcileWithoutLookup, leaseDecision, alreadyConfirmed, conflicting).
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	first := now.Add(-time.Hour)
	plan := RetryPlan{Attempts: 2, MaxAttempts: 3, GiveUpAt: now.Add(time.Hour), FirstAttempt: first,
		Owner: "ops@example.com", BackoffBase: time.Second, BackoffMax: time.Minute,
		Jitter: func(n time.Duration) time.Duration { return n }} // the longest backoff: 2s at attempt 2
	spentAttempts, spentTime := plan, plan
	spentAttempts.Attempts = 3
	spentTime.GiveUpAt = now.Add(time.Second)
	worker := "w1"
	action := db.Action{ID: 7, Owner: "ops@example.com", FirstAttemptAt: &first, LeaseOwner: &worker}
	claimedFrom := func(state string) db.Action { a := action; a.ClaimedFrom = state; return a }
	row := func(o Observation) Rule { return RuleOf[o] }
	parked := func(p RetryPlan) RetryPlan { p.Parked = true; return p }
	window := settings.Cutover{From: time.Date(2025, 12, 1, 0, 0, 0, 0, time.UTC), Until: time.Date(2026, 1, 5, 0, 0, 0, 0, time.UTC)}
	strong := Capabilities{Lookup: true, StrongLookup: true}
	eventual := Capabilities{Lookup: true}
	remembers := Capabilities{KeyMemory: 24 * time.Hour}
	forgot := Capabilities{KeyMemory: 30 * time.Minute}
	settles := Capabilities{Lookup: true, Settle: 10 * time.Minute}
	settlesRetrying := Capabilities{Lookup: true, Settle: 10 * time.Minute, SettleRetry: true}
	calledAt := func(ago time.Duration) db.Action { a := action; at := now.Add(-ago); a.LastAttemptAt = &at; return a }
	const gaveUp = "gave up after %d attempts (first 2026-01-01T11:00:00Z, last 2026-01-01T12:00:00Z): %s; owner ops@example.com"

	cases := []struct {
		name string
		got  Decision
		want Decision
	}{
		{"SuccessConfirms",
			DecideOutcome(Outcome{Observed: ObsSuccess, HTTPStatus: 201, ExternalRef: "rec_1"}, plan, now),
			Decision{State: StateConfirmed, Reason: string(ObsSuccess), NextAttemptAt: now, Rule: row(ObsSuccess)}},
		{"CreatedIsReady",
			Decide(ObsCreated, plan, "", 0, now),
			Decision{State: StatePending, Reason: string(ObsCreated), NextAttemptAt: now, Rule: row(ObsCreated)}},
		{"CreatedForDisconnectedDestinationIsHeld",
			Decide(ObsCreatedDisconnected, plan, "", 0, now),
			Decision{State: StateHeld, Reason: string(ObsCreatedDisconnected), NextAttemptAt: now, Rule: row(ObsCreatedDisconnected)}},
		{"CreatedInCutoverLooksUpFirst",
			CreatedInCutover(window, true, "ops@example.com", now),
			Decision{State: StateUncertain, NextAttemptAt: now, Rule: row(ObsCreatedInCutover),
				Reason: string(ObsCreatedInCutover) + ": cutover from 2025-12-01T00:00:00Z until 2026-01-05T00:00:00Z"}},
		{"CreatedInCutoverWithoutLookupGoesToAPerson",
			CreatedInCutover(window, false, "ops@example.com", now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsCreatedInCutoverNoLookup),
				Reason: string(ObsCreatedInCutoverNoLookup) + ": cutover from 2025-12-01T00:00:00Z until 2026-01-05T00:00:00Z: " +
					"check the destination for what the earlier system did, then Resolve, or Retry confirming you checked"}},
		{"UnfillableParamGoesToAPerson",
			Unfillable("ops@example.com", `amount: the currency "abc" is not an ISO 4217 code`, now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsUnfillable),
				Reason: string(ObsUnfillable) + `: amount: the currency "abc" is not an ISO 4217 code`}},
		{"AlreadyConfirmedStays",
			AlreadyConfirmed(action, now),
			Decision{State: StateConfirmed, Reason: string(ObsAlreadyConfirmed) + ": action 7, linked to this event",
				NextAttemptAt: now, Rule: row(ObsAlreadyConfirmed)}},
		{"RejectedFailsNamingOwner",
			DecideOutcome(Outcome{Observed: ObsRejected, HTTPStatus: 422, Detail: "email is invalid"}, plan, now),
			Decision{State: StateFailed, Reason: string(ObsRejected) + ": email is invalid", NextAttemptAt: now,
				Owner: "ops@example.com", Rule: row(ObsRejected)}},
		{"UnauthorizedHolds",
			DecideOutcome(Outcome{Observed: ObsUnauthorized, HTTPStatus: 401, Detail: "bad token"}, plan, now),
			Decision{State: StateHeld, Reason: string(ObsUnauthorized) + ": bad token", NextAttemptAt: now, Rule: row(ObsUnauthorized)}},
		{"InFlightRetriesAfterBackoff",
			DecideOutcome(Outcome{Observed: ObsInFlight, HTTPStatus: 409}, plan, now),
			Decision{State: StateRetrying, Reason: string(ObsInFlight), NextAttemptAt: now.Add(2 * time.Second), Rule: row(ObsInFlight)}},
		{"ThrottledRetriesAfterRetryAfter",
			DecideOutcome(Outcome{Observed: ObsThrottled, HTTPStatus: 429, RetryAfter: 30 * time.Second, Detail: "slow down"}, plan, now),
			Decision{State: StateRetrying, Reason: string(ObsThrottled) + ": slow down", NextAttemptAt: now.Add(30 * time.Second),
				Rule: row(ObsThrottled)}},
		{"UnsureIsUncertainAtOnce",
			DecideOutcome(Outcome{Observed: ObsUnsure, HTTPStatus: 502, Detail: "bad gateway"}, spentAttempts, now),
			Decision{State: StateUncertain, Reason: string(ObsUnsure) + ": bad gateway", NextAttemptAt: now, Rule: row(ObsUnsure)}},
		{"LookupFindsRecord",
			DecideOutcome(LookupOutcome(action, LookupResult{Found: true, ExternalRef: "rec_1", HTTPStatus: 200}, eventual, now), plan, now),
			Decision{State: StateConfirmed, Reason: string(ObsFound) + ": found by lookup", NextAttemptAt: now, Rule: row(ObsFound)}},
		{"StrongLookupAbsentRetries",
			DecideOutcome(LookupOutcome(action, LookupResult{HTTPStatus: 404}, strong, now), plan, now),
			Decision{State: StateRetrying, NextAttemptAt: now.Add(2 * time.Second), Rule: row(ObsAbsentStrong),
				Reason: string(ObsAbsentStrong) + ": a strong lookup found no record with this key; retrying with the same key"}},
		{"KeyRememberedRetries",
			DecideOutcome(ReconcileWithoutLookup(action, remembers, now), plan, now),
			Decision{State: StateRetrying, NextAttemptAt: now.Add(2 * time.Second), Rule: row(ObsKeyRemembered),
				Reason: string(ObsKeyRemembered) + ": the key is 1h0m0s old and the destination remembers keys for 24h0m0s; retrying with the same key"}},
		{"EventualLookupAbsentIsUnknown",
			DecideOutcome(LookupOutcome(action, LookupResult{HTTPStatus: 404}, eventual, now), plan, now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsUnknowable),
				Reason: "outcome unknown: an eventual lookup found no record, which does not prove it was never created"}},
		{"KeyForgottenIsUnknown",
			DecideOutcome(ReconcileWithoutLookup(action, forgot, now), plan, now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsUnknowable),
				Reason: "outcome unknown: no lookup exists and the destination's key memory (30m0s) has passed"}},
		{"LookupFailedLooksAgainLater",
			DecideOutcome(LookupOutcome(action, LookupResult{Unsure: true, HTTPStatus: 503, Detail: "lookup timed out"}, strong, now), spentAttempts, now),
			Decision{State: StateUncertain, Reason: string(ObsLookupFailed) + ": lookup timed out",
				NextAttemptAt: now.Add(4 * time.Second), Rule: row(ObsLookupFailed)}},
		{"AttemptsSpentFails",
			DecideOutcome(Outcome{Observed: ObsThrottled, HTTPStatus: 503, Detail: "busy"}, spentAttempts, now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsBudgetSpent),
				Reason: fmt.Sprintf(gaveUp, 3, string(ObsThrottled)+": busy")}},
		{"ParkedSpendsNoBudget", // the breaker is open: the outage fails nothing
			DecideOutcome(Outcome{Observed: ObsThrottled, HTTPStatus: 503, Detail: "busy"}, parked(spentAttempts), now),
			Decision{State: StateRetrying, Reason: string(ObsThrottled) + ": busy", NextAttemptAt: now.Add(4 * time.Second),
				Rule: row(ObsThrottled)}},
		{"NotSentWhileParkedGivesItsAttemptBack",
			DecideOutcome(Outcome{Observed: ObsThrottled, Detail: "not sent: breaker", NotSent: true}, parked(plan), now),
			Decision{State: StateRetrying, Reason: string(ObsThrottled) + ": not sent: breaker", NextAttemptAt: now.Add(2 * time.Second),
				Rule: row(ObsThrottled), GiveBack: true}},
		{"NotSentOtherwiseKeepsItsAttempt", // the worker stopped before sending
			DecideOutcome(Outcome{Observed: ObsThrottled, Detail: "not sent: stopping", NotSent: true}, plan, now),
			Decision{State: StateRetrying, Reason: string(ObsThrottled) + ": not sent: stopping", NextAttemptAt: now.Add(2 * time.Second),
				Rule: row(ObsThrottled)}},
		{"ElapsedSpentFails",
			DecideOutcome(Outcome{Observed: ObsThrottled, HTTPStatus: 429, RetryAfter: 2 * time.Hour}, plan, now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsBudgetSpent),
				Reason: fmt.Sprintf(gaveUp, 2, string(ObsThrottled))}},
		{"LookupsFailingPastTheBudgetFail",
			DecideOutcome(LookupOutcome(action, LookupResult{Unsure: true, Detail: "lookup timed out"}, strong, now), spentTime, now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsBudgetSpent),
				Reason: fmt.Sprintf(gaveUp, 2, string(ObsLookupFailed)+": lookup timed out")}},
		{"LeaseWithoutAttemptIsPending",
			LeaseDecision(claimedFrom(StateRetrying), false, plan, now),
			Decision{State: StatePending, NextAttemptAt: now, Rule: row(ObsLeaseNoAttempt),
				Reason: string(ObsLeaseNoAttempt) + ": worker w1 stopped before calling anyone; safe to run"}},
		{"LeaseWithAttemptIsUncertain",
			LeaseDecision(claimedFrom(StatePending), true, plan, now),
			Decision{State: StateUncertain, NextAttemptAt: now, Rule: row(ObsLeaseStarted),
				Reason: string(ObsLeaseStarted) + ": worker w1 stopped after starting the call; reconcile before any repeat"}},
		{"LeaseDuringReconcileStaysUncertain",
			LeaseDecision(claimedFrom(StateUncertain), false, plan, now),
			Decision{State: StateUncertain, NextAttemptAt: now, Rule: row(ObsLeaseReconcile),
				Reason: string(ObsLeaseReconcile) + ": worker w1 stopped while reconciling; reconcile again"}},
		{"ConflictFails",
			Conflicting(action, db.Event{ID: 9, SourceEventID: "evt_2"}, now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsConflict),
				Reason: string(ObsConflict) + ": event 9 (evt_2)"}},
		{"ExistsIsReconciled",
			DecideOutcome(Outcome{Observed: ObsExists, HTTPStatus: 409, Detail: "Contact already exists"}, plan, now),
			Decision{State: StateUncertain, Reason: string(ObsExists) + ": Contact already exists", NextAttemptAt: now,
				Rule: row(ObsExists)}},
		{"ExistsWithoutLookupFails",
			DecideOutcome(Outcome{Observed: ObsExistsNoLookup, HTTPStatus: 409, Detail: "duplicate"}, plan, now),
			Decision{State: StateFailed, Reason: string(ObsExistsNoLookup) + ": duplicate", NextAttemptAt: now,
				Owner: "ops@example.com", Rule: row(ObsExistsNoLookup)}},
		{"UnsettledAbsenceLooksAgainAtSettle",
			DecideOutcome(LookupOutcome(calledAt(4*time.Minute), LookupResult{HTTPStatus: 200}, settles, now), plan, now),
			Decision{State: StateUncertain, NextAttemptAt: now.Add(6 * time.Minute), Rule: row(ObsAbsentUnsettled),
				Reason: string(ObsAbsentUnsettled) + ": an eventual lookup found no record 4m0s after the call; it settles after 10m0s, so it looks again then"}},
		{"SettledAbsenceGoesToTheOwner",
			DecideOutcome(LookupOutcome(calledAt(11*time.Minute), LookupResult{HTTPStatus: 200, Detail: "HTTP 200: no record with this reference"}, settles, now), plan, now),
			Decision{State: StateFailed, NextAttemptAt: now, Owner: "ops@example.com", Rule: row(ObsAbsentSettled),
				Reason: string(ObsAbsentSettled) + ": not found 11 minutes after the call; the index may lag (lookup: HTTP 200: no record with this reference). " +
					"Check the destination: Resolve with the record you find, or Retry confirming it is not there"}},
		{"SettledAbsenceRetriesWhereTheDestinationOptsIn",
			DecideOutcome(LookupOutcome(calledAt(11*time.Minute), LookupResult{HTTPStatus: 200, Detail: "HTTP 200: no record with this reference"}, settlesRetrying, now), plan, now),
			Decision{State: StateRetrying, NextAttemptAt: now.Add(2 * time.Second), Rule: row(ObsAbsentSettledRetry),
				Reason: string(ObsAbsentSettledRetry) + ": an eventual lookup found no record 11m0s after the call, past its settle time of 10m0s " +
					"(lookup: HTTP 200: no record with this reference); retrying with the same key, as the destination opts in"}},
		{"PersonRetriesWhileTheKeyIsRemembered",
			decideManualRetry(t, remembers, first, false, plan, now),
			Decision{State: StatePending, Reason: string(ObsRetryByPerson), NextAttemptAt: now, Rule: row(ObsRetryByPerson)}},
		{"PersonRetriesAfterCheckingTheDestination",
			decideManualRetry(t, forgot, first, true, plan, now),
			Decision{State: StatePending, Reason: string(ObsRetryByPerson), NextAttemptAt: now, Rule: row(ObsRetryByPerson)}},
		{"PersonRetryPastKeyMemoryLooksUpFirst",
			decideManualRetry(t, strong, first, false, plan, now),
			Decision{State: StateUncertain, Reason: string(ObsRetryLookupFirst), NextAttemptAt: now, Rule: row(ObsRetryLookupFirst)}},
		{"ApprovedCorrectionIsPerformed",
			DecideCorrection(plan, "approved by b", now),
			Decision{State: StatePending, Reason: string(ObsCorrectionApproved) + ": approved by b", NextAttemptAt: now,
				Rule: row(ObsCorrectionApproved)}},
	}
	if !CorrectionNeedsNewKey(remembers, &first, now) {
		t.Error("a correction sent while the destination remembers the key was not given a new attempt identity")
	}
	if CorrectionNeedsNewKey(forgot, &first, now) || CorrectionNeedsNewKey(Capabilities{}, &first, now) ||
		CorrectionNeedsNewKey(remembers, nil, now) {
		t.Error("a correction got a new attempt identity where the destination keeps no answer under the key")
	}
	if _, ok := ManualRetry(forgot, first, false, now); ok {
		t.Error("a retry past the key memory, with no lookup and nothing checked, was allowed")
	}
	if _, ok := ManualRetry(eventual, first, false, now); ok {
		t.Error("a retry with only an eventual lookup without settle, nothing checked, was allowed")
	}
	if _, ok := ManualRetry(settles, first, false, now); ok {
		t.Error("a retry with an eventual lookup whose settle does not opt in to a repeat, nothing checked, was allowed")
	}
	if obs, ok := ManualRetry(settlesRetrying, first, false, now); !ok || obs != ObsRetryLookupFirst {
		t.Errorf("a retry where settle opts in to a repeat: %q %v, want a lookup first", obs, ok)
	}
	covered := map[Observation]bool{}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if diff := cmp.Diff(c.want, c.got); diff != "" {
				t.Errorf("decision (-want +got):\n%s", diff)
			}
		})
		covered[c.got.Rule.Observed] = true
	}
	for _, r := range DecisionTable {
		if !covered[r.Observed] {
			t.Errorf("no case decides the row %q", r.Observed)
		}
	}
	if len(RuleOf) != len(DecisionTable) {
		t.Errorf("the decision table has %d rows for %d observations: one is listed twice", len(DecisionTable), len(RuleOf))
	}
}

func decideManualRetry(t *testing.T, caps Capabilities, first time.Time, checked bool, plan RetryPlan, now time.Time) Decision {
	t.Helper()
	obs, ok := ManualRetry(caps, first, checked, now)
	if !ok {
		t.Fatalf("manualRetry(%+v, checked %v) refused", caps, checked)
	}
	return Decide(obs, plan, "", 0, now)
}

func TestDecideUnsettledLooksAgainAtSettle(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	plan := RetryPlan{Attempts: 1, MaxAttempts: 3, GiveUpAt: now.Add(time.Hour), FirstAttempt: now}
	d := Decide(ObsAbsentUnsettled, plan, "not yet", 10*time.Minute, now)
	if d.State != StateUncertain || !d.NextAttemptAt.Equal(now.Add(10*time.Minute)) {
		t.Errorf("Decide = %s at %s, want uncertain at %s", d.State, d.NextAttemptAt, now.Add(10*time.Minute))
	}
}

func TestDecideRetryTiming(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	plan := RetryPlan{Attempts: 2, MaxAttempts: 8, GiveUpAt: now.Add(72 * time.Hour), FirstAttempt: now,
		Owner: "ops@example.com", BackoffBase: time.Second, BackoffMax: time.Hour}
	t.Run("RetryAfterWinsOverBackoff", func(t *testing.T) {
		d := Decide(ObsThrottled, plan, "", 90*time.Second, now)
		if wait := d.NextAttemptAt.Sub(now); wait != 90*time.Second {
			t.Errorf("waits %s, want Retry-After's 90s", wait)
		}
	})
	t.Run("BackoffGrowsWithJitter", func(t *testing.T) {
		for attempt := 1; attempt <= 6; attempt++ {
			full := time.Second << (attempt - 1)
			for range 50 {
				b := backoff(attempt, time.Second, time.Hour, nil)
				if b < full/2 || b > full {
					t.Fatalf("attempt %d: backoff %s outside [%s, %s]", attempt, b, full/2, full)
				}
			}
		}
		if b := backoff(40, time.Second, time.Minute, nil); b > time.Minute {
			t.Errorf("backoff %s above its cap", b)
		}
	})
	t.Run("SpentBudgetNamesOwner", func(t *testing.T) {
		p := plan
		p.Attempts = 8
		d := Decide(ObsUnsure, p, "", 0, now) // uncertain is not a retry: budget does not apply
		if d.State != StateUncertain {
			t.Errorf("unsure with a spent budget: %s, want uncertain (reconcile first)", d.State)
		}
		d = Decide(ObsInFlight, p, "409", 0, now)
		if d.State != StateFailed || !strings.Contains(d.Reason, "ops@example.com") || !strings.Contains(d.Reason, "8 attempts") {
			t.Errorf("spent budget: %+v", d)
		}
	})
}

// TestDecideReadsReplies checks the table's reading of a destination's reply: the
// default observation of each status, which replies may come after the destination
// acted (docs/how-it-works.md: only 4xx and 503 say nothing was done), and which errors-rule
// meanings repeat the call without a lookup.
func TestDecideReadsReplies(t *testing.T) {
	statuses := map[int]Observation{200: ObsSuccess, 201: ObsSuccess, 204: ObsSuccess,
		302: ObsUnsure, 400: ObsRejected, 401: ObsUnauthorized, 403: ObsUnauthorized,
		404: ObsRejected, 409: ObsInFlight, 422: ObsRejected, 429: ObsThrottled,
		500: ObsUnsure, 502: ObsUnsure, 503: ObsThrottled, 504: ObsUnsure}
	for status, want := range statuses {
		if got := ObserveStatus(status); got != want {
			t.Errorf("ObserveStatus(%d) = %q, want %q", status, got, want)
		}
	}
	for status := 100; status < 600; status++ {
		want := status < 400 || status >= 500 && status != 503
		if got := MayHavePerformed(status); got != want {
			t.Errorf("MayHavePerformed(%d) = %v, want %v", status, got, want)
		}
	}
	repeats := map[string]bool{settings.MeansRejected: false, settings.MeansRateLimited: true, settings.MeansUnavailable: true,
		settings.MeansUnauthorized: true, settings.MeansUncertain: false, settings.MeansExists: false}
	for m, want := range repeats {
		if got := Repeats(m); got != want {
			t.Errorf("Repeats(%q) = %v, want %v", m, got, want)
		}
	}
	if got := ObserveMeaning(settings.MeansExists, false); got != ObsExistsNoLookup {
		t.Errorf("exists without a lookup = %q, want %q", got, ObsExistsNoLookup)
	}
}
