package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/alerts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestDestinationsPageDuringAnOutage: in a browser, the destinations page of a
// CRM whose breaker the workers opened shows it open since when and why, the
// actions it parks, the next probe, and the outage's alert to Slack failing
// (how often, why, when next); the admin's controls are there. The screenshot
// is docs/dashboard-destinations-outage.png.
func TestDestinationsPageDuringAnOutage(t *testing.T) {
	t.Parallel()
	d, slack := slackDashboard(t, "ops-slack", "", 50*time.Millisecond,
		alerts.Backoff{First: 200 * time.Millisecond, Max: time.Minute, GiveUp: time.Hour})
	ctx := context.Background()
	if ok, err := ledger.OpenBreaker(ctx, d.pool, "crm", "call answered 503 (Service Unavailable)",
		settings.BreakerSettings{OpenFor: 10 * time.Minute, MaxOpenFor: 20 * time.Minute}, ledger.AlertPlanOf(d.cfg, "crm")); !ok || err != nil {
		t.Fatalf("open: %v %v", ok, err)
	}
	for i := range 4 {
		d.checkout(fmt.Sprintf("evt_down_%d", i), fmt.Sprintf("down-%d", i), "")
	}
	deadline := time.Now().Add(30 * time.Second)
	for parked := 0; parked < 4 || slack.Refused() < 2; {
		if err := d.pool.QueryRow(ctx, `SELECT count(*) FROM actions WHERE destination = 'crm' AND parked_at IS NOT NULL`).Scan(&parked); err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d actions parked, Slack refused %d alerts", parked, slack.Refused())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/destinations", "#dest-crm")
	b.do("open the outages and alerts", chromedp.Click(chromedp.CSS("#dest-crm details.outages summary")))
	cell := b.text("#dest-crm")
	for _, want := range []string{"open", "call answered 503 (Service Unavailable)", "4 waiting", "next probe",
		"ops-slack (down):", "failed", "Slack answered HTTP 500: rollup_error", "Open breaker…", "Close breaker…"} {
		if !strings.Contains(cell, want) {
			t.Errorf("crm's row does not say %q:\n%s", want, cell)
		}
	}
	b.screenshot("destinations-outage")
}
