package oncehook

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	plan := RetryPlan{Attempts: 1, MaxAttempts: 3, GiveUpAt: now.Add(time.Hour), FirstAttempt: now,
		Owner: "ops@example.com", BackoffBase: time.Second, BackoffMax: time.Minute}
	cases := []struct {
		name  string
		obs   Observation
		plan  RetryPlan
		after time.Duration
		want  string
	}{
		{"SuccessConfirms", ObsSuccess, plan, 0, StateConfirmed},
		{"AlreadyConfirmedStays", ObsAlreadyConfirmed, plan, 0, StateConfirmed},
		{"RejectedFails", ObsRejected, plan, 0, StateFailed},
		{"UnauthorizedHolds", ObsUnauthorized, plan, 0, StateHeld},
		{"InFlightRetries", ObsInFlight, plan, 0, StateRetrying},
		{"ThrottledRetries", ObsThrottled, plan, 0, StateRetrying},
		{"UnsureIsUncertain", ObsUnsure, plan, 0, StateUncertain},
		{"FoundConfirms", ObsFound, plan, 0, StateConfirmed},
		{"StrongAbsentRetries", ObsAbsentStrong, plan, 0, StateRetrying},
		{"KeyRememberedRetries", ObsKeyRemembered, plan, 0, StateRetrying},
		{"UnknowableFails", ObsUnknowable, plan, 0, StateFailed},
		{"LeaseWithoutAttemptIsPending", ObsLeaseNoAttempt, plan, 0, StatePending},
		{"LeaseWithAttemptIsUncertain", ObsLeaseStarted, plan, 0, StateUncertain},
		{"ExistsIsReconciled", ObsExists, plan, 0, StateUncertain},
		{"ExistsWithoutLookupFails", ObsExistsNoLookup, plan, 0, StateFailed},
		{"UnsettledAbsenceLooksAgain", ObsAbsentUnsettled, plan, 0, StateUncertain},
		{"SettledAbsenceRetries", ObsAbsentSettled, plan, 0, StateRetrying},
		{"AttemptsSpentFails", ObsThrottled, func() RetryPlan { p := plan; p.Attempts = 3; return p }(), 0, StateFailed},
		{"ElapsedSpentFails", ObsThrottled, plan, 2 * time.Hour, StateFailed},
	}
	var got, want []string
	for _, c := range cases {
		d := Decide(c.obs, c.plan, "detail", c.after, now)
		got = append(got, c.name+": "+d.State)
		want = append(want, c.name+": "+c.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if len(DecisionTable) != 18 {
		t.Errorf("the decision table has %d rows; DESIGN.md section 3 has 14, section 4a adds 4", len(DecisionTable))
	}
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
				b := Backoff(attempt, time.Second, time.Hour)
				if b < full/2 || b > full {
					t.Fatalf("attempt %d: backoff %s outside [%s, %s]", attempt, b, full/2, full)
				}
			}
		}
		if b := Backoff(40, time.Second, time.Minute); b > time.Minute {
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
