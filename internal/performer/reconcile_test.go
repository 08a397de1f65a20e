package performer

import (
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
)

// An eventual lookup's "absent" is reported only once settle has passed since the
// call, and then goes to the owner unless the destination opts in to a repeat.
func TestEventualAbsence(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(ago time.Duration) db.Action { t := now.Add(-ago); return db.Action{LastAttemptAt: &t} }
	tests := []struct {
		name      string
		a         db.Action
		settle    time.Duration
		retry     bool
		want      ledger.Observation
		wantAfter time.Duration
		detail    string
	}{
		{"WithoutSettleNothingIsProved", at(time.Hour), 0, false, ledger.ObsUnknowable, 0, "does not prove"},
		{"BeforeSettleLooksAgainThen", at(4 * time.Minute), 10 * time.Minute, false, ledger.ObsAbsentUnsettled, 6 * time.Minute, "looks again then"},
		{"AfterSettleGoesToTheOwner", at(11 * time.Minute), 10 * time.Minute, false, ledger.ObsAbsentSettled, 0, "not found 11 minutes after the call; the index may lag"},
		{"AfterSettleWithTheOptInRetries", at(11 * time.Minute), 10 * time.Minute, true, ledger.ObsAbsentSettledRetry, 0, "retrying with the same key"},
		{"NoCallRecordedCountsAtOnce", db.Action{}, 10 * time.Minute, false, ledger.ObsAbsentSettled, 0, "not found 10 minutes after the call"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := ledger.EventualAbsence(tt.a, ledger.Capabilities{Lookup: true, Settle: tt.settle, SettleRetry: tt.retry}, now, ledger.Outcome{})
			if out.Observed != tt.want || out.RetryAfter != tt.wantAfter || !strings.Contains(out.Detail, tt.detail) {
				t.Errorf("eventualAbsence = %s after %s (%q), want %s after %s (%q)",
					out.Observed, out.RetryAfter, out.Detail, tt.want, tt.wantAfter, tt.detail)
			}
			if d := ledger.Decide(out.Observed, ledger.RetryPlan{Attempts: 1, MaxAttempts: 8, GiveUpAt: now.Add(72 * time.Hour)}, out.Detail, out.RetryAfter, now); tt.want == ledger.ObsAbsentUnsettled &&
				!d.NextAttemptAt.Equal(now.Add(tt.wantAfter)) {
				t.Errorf("looks again at %s, want %s", d.NextAttemptAt, now.Add(tt.wantAfter))
			}
		})
	}
}
