package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/cutover"
	"github.com/oncehook/oncehook/internal/ledger"
)

// TestCutoverOnTheDashboard: actions imported from an earlier system say so on
// their page and are what the "imported" filter lists; the overview shows the
// cutover window in progress with its end, and what it does to each action.
func TestCutoverOnTheDashboard(t *testing.T) {
	t.Parallel()
	from := time.Now().UTC().Add(-time.Hour).Truncate(time.Second)
	until := from.Add(72 * time.Hour)
	cfg := strings.Replace(dashConfig, "environment: live, secret_env: STRIPE_SECRET}",
		fmt.Sprintf("environment: live, secret_env: STRIPE_SECRET, cutover: {from: %q, until: %q}}",
			from.Format(time.RFC3339), until.Format(time.RFC3339)), 1)
	d := newDashboardConfig(t, cfg)
	lines := `{"action":"open_opportunity","key":["enq-old-1"],"external_ref":"opp_901","performed_at":"2026-11-30T10:00:00Z"}
{"action":"open_opportunity","key":["enq-old-2"],"external_ref":"opp_902","performed_at":"2026-11-30T10:05:00Z"}
`
	if _, err := cutover.Import(context.Background(), cutover.Params{Pool: d.pool, Config: d.cfg, Client: "acme",
		File: "legacy.jsonl", By: "ada"}, strings.NewReader(lines)); err != nil {
		t.Fatal(err)
	}
	// An event of oncehook's own: under the window, the CRM has no lookup, so
	// its create goes to a person; it is no import.
	d.checkout("evt_own", "enq-own", "")
	d.waitAction("open_opportunity", "enq-own", ledger.StateFailed)

	admin := d.person()
	admin.login(adminEmail)
	list := admin.get("/actions?imported=only")
	if list.status != 200 || !strings.Contains(list.body, "enq-old-1") || !strings.Contains(list.body, "enq-old-2") ||
		strings.Contains(list.body, "enq-own") {
		t.Errorf("the imported filter: %d\n%s", list.status, tailOf(list.body, 3000))
	}
	if all := admin.get("/actions"); !strings.Contains(all.body, "enq-own") || !strings.Contains(all.body, "enq-old-1") {
		t.Errorf("every action: %s", tailOf(all.body, 3000))
	}
	if bad := admin.get("/actions?imported=yes"); bad.status != 400 {
		t.Errorf("imported=yes: %d", bad.status)
	}
	a := d.waitAction("open_opportunity", "enq-old-1", ledger.StateConfirmed)
	page := admin.get(fmt.Sprintf("/actions/%d?client=%s", a.ID, a.Client))
	for _, want := range []string{"Imported: performed by an earlier system", "Recorded from legacy.jsonl", "by ada",
		"oncehook never called crm for it"} {
		if !strings.Contains(page.body, want) {
			t.Errorf("the imported action's page lacks %q:\n%s", want, tailOf(page.body, 3000))
		}
	}
	own := d.waitAction("open_opportunity", "enq-own", ledger.StateFailed)
	if p := admin.get(fmt.Sprintf("/actions/%d?client=%s", own.ID, own.Client)); strings.Contains(p.body, "Imported:") {
		t.Errorf("oncehook's own action says it was imported")
	}
	overview := admin.get("/")
	for _, want := range []string{"Cutover in progress", "open_opportunity: events from before",
		"go to a person first (crm has no lookup)", until.Format(time.RFC3339)} {
		if !strings.Contains(overview.body, want) {
			t.Errorf("the overview lacks %q:\n%s", want, tailOf(overview.body, 4000))
		}
	}
}
