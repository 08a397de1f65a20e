package review

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/internal/store"
)

// longFailedStep is the paragraph every failed row used to show whatever held it.
const longFailedStep = "Nothing is scheduled: check the reason, then Retry"

// TestRowStepIsItsCauses: for every cause a failed action's reason can start
// with (the cause list's own prefixes), the row's step is one short sentence,
// never the long paragraph, with an act a person can do; it is the fix the
// queue's cause list shows for that cause, or that fix made specific: the field
// a destination refused, the Message-ID to look for. The other states that wait
// for a person say their own fix, and the workers' states offer no act.
func TestRowStepIsItsCauses(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	params := json.RawMessage(`{"amount": 0, "email": "ada@example.com"}`)
	rowActs := []string{ActRetry, ActReconcile, ActResolve, ActCancel, ActCorrect, ActDecide, ActReconnect}
	for _, cause := range append(causePrefixes(), "") {
		a := ledger.Action{ID: 7, Name: "open_opportunity", State: ledger.StateFailed, Destination: "crm",
			Reason: cause + `: HTTP 422: {"error":"the amount must be positive"}`, Params: params}
		s := NextStepOf(a, StepFacts{Now: now})
		_, fix := failedCauseWords("crm", cause)
		switch {
		case s.Short == "" || strings.HasPrefix(s.Short, longFailedStep) || len(s.Short) > 90 || strings.Count(s.Short, ". ") > 0:
			t.Errorf("cause %q: the row says %q, want one short sentence", cause, s.Short)
		case !slices.Contains(rowActs, s.Act):
			t.Errorf("cause %q: the row's act is %q, want one a person can do", cause, s.Act)
		case cause == string(ledger.ObsRejected) || cause == string(ledger.ObsUnfillable):
			if s.Short != "Correct amount, then Retry." || s.Act != ActCorrect {
				t.Errorf("cause %q: the row says %q (%s), want the refused field named and Correct", cause, s.Short, s.Act)
			}
		case s.Short != fix+".":
			t.Errorf("cause %q: the row says %q, want the cause list's fix %q", cause, s.Short, fix)
		}
		if !strings.HasPrefix(s.Text, "Nothing is scheduled") {
			t.Errorf("cause %q: the action's page says %q, want the long explanation kept there", cause, s.Text)
		}
	}

	// Mail whose outcome nobody knows: the row names the Message-ID to look for.
	mail := ledger.Action{ID: 8, State: ledger.StateFailed, Destination: "mail", Reason: causeOutcomeUnknown + ": no lookup"}
	s := NextStepOf(mail, StepFacts{Now: now, Evidence: []ledger.Evidence{{Label: "Message-ID", Value: "<oh_1@oncehook>"}}})
	if s.Short != "Look for Message-ID <oh_1@oncehook> at mail, then Resolve or Retry." || s.Act != ActResolve {
		t.Errorf("unknown mail: the row says %q (%s)", s.Short, s.Act)
	}

	at := now.Add(time.Hour)
	for _, c := range []struct {
		name  string
		a     ledger.Action
		f     StepFacts
		short string
		act   string
	}{
		{"a correction waiting", ledger.Action{State: ledger.StateFailed, Destination: "crm", Reason: string(ledger.ObsRejected)},
			StepFacts{Correction: &Correction{ProposedBy: "ops@example.com"}}, "Approve or refuse the correction ops@example.com proposed.", ActDecide},
		{"held", ledger.Action{State: ledger.StateHeld, Destination: "crm"},
			StepFacts{Disconnected: &DestinationStatus{Name: "crm"}}, "Reconnect crm; it then runs.", ActReconnect},
		{"held, its client gone", ledger.Action{State: ledger.StateHeld, Destination: "crm"},
			StepFacts{Unconfigured: true}, "Its client is gone: Cancel it, or Resolve it if done another way.", ActCancel},
		{"uncertain, nothing scheduled", ledger.Action{State: ledger.StateUncertain, Destination: "crm", NextAttemptAt: ledger.WaitingForPredecessor},
			StepFacts{}, "Reconcile: look it up at crm before any repeat.", ActReconcile},
		{"uncertain, looked up later", ledger.Action{State: ledger.StateUncertain, Destination: "crm", NextAttemptAt: at},
			StepFacts{}, "Wait: it is looked up at crm first; or Reconcile now.", ActReconcile},
		{"pending", ledger.Action{State: ledger.StatePending, Destination: "crm", NextAttemptAt: at},
			StepFacts{}, "Wait: a worker will perform it at 2026-12-03 13:00:00 UTC.", ""},
		{"retrying", ledger.Action{State: ledger.StateRetrying, Destination: "crm", NextAttemptAt: at},
			StepFacts{}, "Wait: the worker retries with the same key at 2026-12-03 13:00:00 UTC.", ""},
	} {
		c.f.Now = now
		s := NextStepOf(c.a, c.f)
		if s.Short != c.short || s.Act != c.act {
			t.Errorf("%s: the row says %q (%q), want %q (%q)", c.name, s.Short, s.Act, c.short, c.act)
		}
	}
}

// TestCausesSplitTheUnconfigured: a group that holds actions of a configured
// client and of one no longer configured is two causes, counted apart, and the
// queues' totals hold both.
func TestCausesSplitTheUnconfigured(t *testing.T) {
	t.Parallel()
	r := &Review{cfg: &settings.Config{Sources: []settings.Source{{Name: "s", Client: "acme"}}}}
	t0 := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	rows := []store.CauseCount{{DashboardCausesRow: db.DashboardCausesRow{State: ledger.StateHeld, Destination: "crm", N: 5,
		Oldest: t0, Unconfigured: 2, OldestConfigured: t0.Add(time.Hour)}, StateOldest: t0}}
	gone := []db.DashboardCausesUnconfiguredRow{{Client: "beta", State: ledger.StateHeld, Destination: "crm", N: 2, Oldest: t0}}
	var got []string
	for _, c := range r.causes(rows, gone, nil) {
		got = append(got, fmt.Sprintf("%d %s since %s", c.Count, c.Label, c.Oldest.Format("15:04")))
	}
	want := []string{"3 crm disconnected since 01:00", "2 crm: its client beta is no longer configured since 00:00"}
	if !slices.Equal(got, want) {
		t.Errorf("causes %q, want %q", got, want)
	}
	if q := queueSummaries(rows); q[slices.IndexFunc(q, func(s QueueSummary) bool { return s.Name == ledger.QueueOutstanding })].Count != 5 {
		t.Errorf("the queues count %+v, want all five held", q)
	}
}
