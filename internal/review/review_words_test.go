package review

import (
	"fmt"
	"io/fs"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/migrations"
)

// TestPlainReasonSaysItInWords: each stored reason reads as a sentence naming
// the destination, without the decision table's wording or a Go error's.
func TestPlainReasonSaysItInWords(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, reason, want string
	}{
		{"Unsure", string(ledger.ObsUnsure) + `: Post "http://127.0.0.1:9090/opportunities": context deadline exceeded`,
			"Nobody knows yet whether crm acted"},
		{"Success", string(ledger.ObsSuccess) + ": HTTP 201", "crm confirmed it."},
		{"Rejected", string(ledger.ObsRejected) + `: HTTP 422: {"error":"amount_total must be at least 50 cents"}`,
			"crm refused the request as it was sent: it needs correcting before it can succeed. It said: \u201camount_total must be at least 50 cents\u201d"},
		{"GaveUp", "gave up after 8 attempts (first 2026-01-01T00:00:00Z, last 2026-01-02T00:00:00Z): " +
			string(ledger.ObsThrottled) + ": HTTP 429; owner ops@example.com", "oncehook gave up after 8 attempts. Last time: crm asked"},
		{"OutcomeUnknown", "outcome unknown: no lookup", "Nobody can tell from here whether crm acted"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, detail := PlainReason(ledger.Action{Reason: c.reason, Destination: "crm", Attempts: 8})
			if !strings.HasPrefix(got, c.want) {
				t.Errorf("PlainReason(%q) = %q, want it to start with %q", c.reason, got, c.want)
			}
			if strings.Contains(got, "(") && strings.Contains(got, "xx") || strings.Contains(got, "http://") {
				t.Errorf("PlainReason(%q) = %q shows internals", c.reason, got)
			}
			if detail != c.reason {
				t.Errorf("the detail is %q, want the stored reason", detail)
			}
		})
	}
}

// The start of a reason that migration 00030 keeps for the causes' index holds
// every cause prefix, so a cause read from it is the cause of the whole reason.
func TestCausePrefixesFitReasonStart(t *testing.T) {
	t.Parallel()
	for _, p := range causePrefixes() {
		if len(p) > reasonStartBytes {
			t.Errorf("cause prefix %q is %d bytes, more than the %d of reason_start", p, len(p), reasonStartBytes)
		}
	}
	sql, err := fs.ReadFile(migrations.FS, "00030_waiting_causes.sql")
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("left(reason, %d)", reasonStartBytes); !strings.Contains(string(sql), want) {
		t.Errorf("migration 00030 does not keep %s: reasonStartBytes and reason_start differ", want)
	}
}
