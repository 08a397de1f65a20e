package ledger_test

import (
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestNextStepOf: the step each case of the review queue shows is read from the
// ledger: a failed predecessor blocks (named, with its state), a disconnected
// destination holds until a named person reconnects it and schedules nothing, a
// rate limit waits until its time, and a failed action has nothing scheduled.
func TestNextStepOf(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	parked := time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC) // waiting for a predecessor
	pred := int64(1)
	failedPred := &ledger.Action{ID: 1, Name: "open_opportunity", State: ledger.StateFailed}
	crmDown := &review.DestinationStatus{Name: "crm", Status: "disconnected", Owner: "crm-admin@example.com"}
	later := now.Add(90 * time.Second)
	cases := []struct {
		name        string
		a           ledger.Action
		f           review.StepFacts
		wantIn      []string
		wantNot     []string
		wantAttempt *time.Time
		blocked     bool
	}{
		{name: "FailedPredecessorBlocks",
			a:      ledger.Action{ID: 2, State: ledger.StatePending, AfterID: &pred, NextAttemptAt: parked, Destination: "mail"},
			f:      review.StepFacts{Predecessor: failedPred, Now: now},
			wantIn: []string{"Blocked", "open_opportunity (action 1)", "failed"}, wantNot: []string{"will perform"}, blocked: true},
		{name: "PendingPredecessorIsWaitedFor",
			a:      ledger.Action{ID: 2, State: ledger.StatePending, AfterID: &pred, NextAttemptAt: parked},
			f:      review.StepFacts{Predecessor: &ledger.Action{ID: 1, Name: "open_opportunity", State: ledger.StateRetrying}, Now: now},
			wantIn: []string{"open_opportunity (action 1)", "retrying", "once that one is confirmed"}, blocked: true},
		{name: "HeldUntilANamedPersonReconnects",
			a:      ledger.Action{ID: 3, State: ledger.StateHeld, Destination: "crm", NextAttemptAt: now},
			f:      review.StepFacts{Disconnected: crmDown, Now: now},
			wantIn: []string{"Nothing is scheduled", "crm-admin@example.com", "reconnects crm"}},
		{name: "UncertainBehindADisconnectedDestinationSchedulesNothing",
			a:      ledger.Action{ID: 4, State: ledger.StateUncertain, Destination: "crm", NextAttemptAt: now.Add(-time.Hour)},
			f:      review.StepFacts{Disconnected: crmDown, Now: now},
			wantIn: []string{"Nothing is scheduled", "reconnects crm", "looks the operation up"}},
		{name: "RateLimitWaitsUntilItsTime",
			a: ledger.Action{ID: 5, State: ledger.StateRetrying, Destination: "crm", NextAttemptAt: later,
				Reason: string(ledger.ObsThrottled) + ": HTTP 429"},
			f:      review.StepFacts{Now: now},
			wantIn: []string{"rate limit", "2026-01-01 12:01:30 UTC"}, wantAttempt: &later},
		{name: "FailedBehindADisconnectedDestinationStillNeedsAPerson",
			a:      ledger.Action{ID: 9, State: ledger.StateFailed, Destination: "crm", NextAttemptAt: now},
			f:      review.StepFacts{Disconnected: crmDown, Now: now},
			wantIn: []string{"Nothing is scheduled", "Retry"}, wantNot: []string{"then a worker"}},
		{name: "FailedHasNothingScheduled",
			a:      ledger.Action{ID: 6, State: ledger.StateFailed, NextAttemptAt: now},
			f:      review.StepFacts{Now: now},
			wantIn: []string{"Nothing is scheduled", "Correct"}},
		{name: "CorrectionWaitsForAnotherPerson",
			a: ledger.Action{ID: 7, State: ledger.StateFailed, NextAttemptAt: now},
			f: review.StepFacts{Now: now, Correction: &review.Correction{ProposedBy: "ops@example.com",
				Approve: settings.ApproveAnotherPerson}},
			wantIn: []string{"ops@example.com proposed a correction", "another person"}},
		{name: "PendingDueNow",
			a:      ledger.Action{ID: 8, State: ledger.StatePending, NextAttemptAt: now},
			f:      review.StepFacts{Now: now},
			wantIn: []string{"a worker will perform it shortly"}, wantAttempt: &now},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := review.NextStepOf(c.a, c.f)
			for _, w := range c.wantIn {
				if !strings.Contains(got.Text, w) {
					t.Errorf("step %q does not say %q", got.Text, w)
				}
			}
			for _, w := range c.wantNot {
				if strings.Contains(got.Text, w) {
					t.Errorf("step %q says %q", got.Text, w)
				}
			}
			if (c.wantAttempt == nil) != (got.NextAttempt == nil) ||
				(c.wantAttempt != nil && !c.wantAttempt.Equal(*got.NextAttempt)) {
				t.Errorf("next attempt = %v, want %v", got.NextAttempt, c.wantAttempt)
			}
			if (got.BlockedBy != nil) != c.blocked {
				t.Errorf("blocked by %v, want blocked %v", got.BlockedBy, c.blocked)
			}
		})
	}
}

// TestNextStepThroughTheAPI: the JSON API reads the same step from the stored
// ledger: an email waiting for a rejected CRM step is blocked by it, named with
// its state, and has no next attempt.
func TestNextStepThroughTheAPI(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	w.deliver(checkout{eventID: "evt_next_1", enquiry: "enq-next", amount: 100})
	pred := w.waitFor("open_opportunity", "enq-next", "failed")
	email := w.waitFor("send_welcome_email", "enq-next", "pending")
	d := w.detail(email.ID)
	blocked, _ := d["blocked_by"].(map[string]any)
	if blocked["id"] != pred.ID || blocked["state"] != "failed" || d["next_attempt_at"] != nil ||
		!strings.Contains(d["next_step"].(string), "Blocked") {
		t.Errorf("the waiting email: next_step %q, blocked_by %v, next_attempt_at %v",
			d["next_step"], d["blocked_by"], d["next_attempt_at"])
	}
	pd := w.detail(pred.ID)
	if f, _ := pd["follow_ons"].([]any); len(f) != 1 || f[0].(map[string]any)["id"] != email.ID {
		t.Errorf("the failed CRM step lists follow-ons %v, want the email", pd["follow_ons"])
	}
}
