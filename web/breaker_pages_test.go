package web_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/alerts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBreakerByHandOnThePages: an admin opens the CRM's breaker by hand from
// the destinations page through its confirmation step (what will happen, what
// waits, why), the actions that come meanwhile wait parked, the page shows the
// outage opened by the admin, and the admin closes it early through the same
// step, which says how many of which client wait and releases them. An
// operator gets neither the links nor the steps.
func TestBreakerByHandOnThePages(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	admin, ops := d.person(), d.person()
	admin.login(adminEmail)
	ops.login(opsEmail)
	const step = "/destinations/crm/breaker"

	if pg := ops.get(step + "?state=open"); pg.status != http.StatusForbidden {
		t.Fatalf("an operator's confirmation step: %d", pg.status)
	}
	if pg := ops.post("/destinations", step, url.Values{"state": {"open"}, "reason": {"x"}, "confirmed": {"1"}}); pg.status != http.StatusForbidden {
		t.Fatalf("an operator opening the breaker: %d", pg.status)
	}
	if pg := ops.get("/destinations"); strings.Contains(pg.body, "Open breaker") {
		t.Error("the operator's destinations page offers to open a breaker")
	}
	if pg := admin.get("/destinations"); !strings.Contains(pg.body, `href="/destinations/crm/breaker?state=open"`) {
		t.Fatalf("the admin's destinations page has no link to open crm's breaker:\n%s", tailOf(pg.body, 2000))
	}

	pg := admin.get(step + "?state=open")
	for _, want := range []string{"Open the breaker of crm", "Its due actions are parked", "No action waits for it.",
		`name="reason"`, `name="until"`} {
		if !strings.Contains(pg.body, want) {
			t.Errorf("the opening step does not say %q", want)
		}
	}
	until := time.Now().Add(time.Hour).UTC().Format("2006-01-02T15:04")
	pg = admin.post(step+"?state=open", step, url.Values{"state": {"open"}, "reason": {"CRM maintenance"},
		"until": {until}, "confirmed": {"1"}})
	if pg.status != http.StatusSeeOther || pg.location != "/destinations#dest-crm" {
		t.Fatalf("opening: %d to %q: %s", pg.status, pg.location, tailOf(pg.body, 500))
	}
	pg = admin.get("/destinations")
	body := html.UnescapeString(pg.body)
	for _, want := range []string{"is open by hand until", "opened by hand by " + adminEmail + ": CRM maintenance",
		"Outages and alerts", "going on", "opened by " + adminEmail, "Close breaker…"} {
		if !strings.Contains(body, want) {
			t.Errorf("the destinations page does not say %q", want)
		}
	}

	for i := range 3 {
		d.checkout(fmt.Sprintf("evt_hold_%d", i), fmt.Sprintf("hold-%d", i), "")
	}
	deadline := time.Now().Add(30 * time.Second)
	parked := func() int {
		var n int
		if err := d.pool.QueryRow(context.Background(), `SELECT count(*) FROM actions WHERE destination = 'crm'
			AND parked_at IS NOT NULL`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	for parked() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 3 actions parked while the breaker is open by hand", parked())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if n := len(d.crm.Creates()); n != 0 {
		t.Fatalf("the CRM received %d creates while its breaker was open by hand", n)
	}

	pg = admin.get(step + "?state=closed")
	for _, want := range []string{"Close the breaker of crm", "Its parked actions are released", "acme: 3 actions"} {
		if !strings.Contains(pg.body, want) {
			t.Errorf("the closing step does not say %q:\n%s", want, tailOf(pg.body, 1500))
		}
	}
	pg = admin.post(step+"?state=closed", step, url.Values{"state": {"closed"}, "reason": {"CRM back early"}, "confirmed": {"1"}})
	if pg.status != http.StatusSeeOther {
		t.Fatalf("closing: %d: %s", pg.status, tailOf(pg.body, 500))
	}
	if pg := admin.get("/destinations"); !strings.Contains(pg.body, "3 parked actions were released") {
		t.Errorf("the destinations page does not say what the close released:\n%s", tailOf(pg.body, 1500))
	}
	for i := range 3 {
		d.waitAction("open_opportunity", fmt.Sprintf("hold-%d", i), ledger.StateConfirmed)
	}
	if pg := admin.get("/destinations"); !strings.Contains(html.UnescapeString(pg.body), ", back ") {
		t.Error("the outage is not shown over")
	}
}

// TestTheDestinationsPageShowsFailedAlerts: while Slack answers 500 the
// destinations page shows the outage's Slack alert failed, how often, why and
// when it is tried next; once Slack is back, sent. No action or breaker waits
// for it: the breaker opened and closed meanwhile.
func TestTheDestinationsPageShowsFailedAlerts(t *testing.T) {
	t.Parallel()
	d, slack := slackDashboard(t, "ops", "quiet: 1s, ", 20*time.Millisecond,
		alerts.Backoff{First: 50 * time.Millisecond, Max: 200 * time.Millisecond, GiveUp: time.Hour})
	admin := d.person()
	admin.login(adminEmail)
	const step = "/destinations/crm/breaker"
	if pg := admin.post(step+"?state=open", step, url.Values{"state": {"open"}, "reason": {"failover drill"}, "confirmed": {"1"}}); pg.status != http.StatusSeeOther {
		t.Fatalf("opening: %d", pg.status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for slack.Refused() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("Slack refused %d alerts", slack.Refused())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if pg := admin.post(step+"?state=closed", step, url.Values{"state": {"closed"}, "reason": {"drill over"}, "confirmed": {"1"}}); pg.status != http.StatusSeeOther {
		t.Fatalf("closing while Slack fails: %d", pg.status)
	}
	body := html.UnescapeString(admin.get("/destinations").body)
	for _, want := range []string{"ops (down):", "failed ", "×, next try", "Slack answered HTTP 500: rollup_error"} {
		if !strings.Contains(body, want) {
			t.Errorf("the destinations page does not say %q while Slack fails:\n%s", want, tailOf(body, 2500))
		}
	}
	slack.Fail(false)
	for len(slack.Messages()) < 2 { // down, then recovered after the quiet second
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatalf("Slack got %d messages once back, want 2", len(slack.Messages()))
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		body = html.UnescapeString(admin.get("/destinations").body)
		if strings.Count(body, "sent ") >= 2 || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if !strings.Contains(body, "ops (down): sent") || !strings.Contains(body, "ops (recovered): sent") {
		t.Errorf("the destinations page does not show both alerts sent:\n%s", body[max(0, strings.Index(body, "Outages and alerts")):])
	}
}

// slackDashboard is a dashboard whose crm tells its outages on a Slack channel
// named channel (alerts: {<quiet>channels: [...]}), and a sender of the alerts
// polling every poll with backoff; the Slack webhook refuses until told
// otherwise.
func slackDashboard(t *testing.T, channel, quiet string, poll time.Duration, backoff alerts.Backoff) (*dashboard, *sandbox.Slack) {
	t.Helper()
	const hook = "/services/T0DASHBOARD/B0ALERTS01/abcdefghijklmnopqrstuvwx"
	slack := sandbox.NewSlack(hook)
	slack.Fail(true)
	srv := httptest.NewServer(slack)
	t.Cleanup(srv.Close)
	cfgText := strings.Replace(dashConfig, "    owner: crm-admin@example.com\n",
		"    owner: crm-admin@example.com\n    alerts: ["+channel+"]\n", 1) +
		"alerts: {" + quiet + "channels: [{name: " + channel + ", kind: slack, url_env: SLACK_URL}]}\n"
	d := newDashboardEnv(t, cfgText, map[string]string{"SLACK_URL": srv.URL + hook})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		alerts.New(alerts.Params{Pool: d.pool, Config: d.cfg, Poll: poll, Backoff: backoff}).Run(ctx)
		close(done)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return d, slack
}
