package web_test

import (
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestQueueShowsParkedAsOneCause: while the CRM's breaker is open, the
// outstanding queue lists none of its parked actions as rows: they are one line
// above the table, with their count, linking to them alone; the state counts
// still hold them (they stay in their state); and a parked action's page says
// it is parked and why.
func TestQueueShowsParkedAsOneCause(t *testing.T) {
	t.Parallel()
	cfg := strings.Replace(dashConfig, "    owner: crm-admin@example.com\n",
		"    owner: crm-admin@example.com\n    breaker: {min_calls: 3, open_for: 1h, max_open_for: 2h}\n", 1)
	// Budget enough that no action fails on 503s before the breaker opens: on a
	// slow run one action's retries could spend its 3 attempts first (CI saw it).
	cfg = strings.Replace(cfg, "    retry: {attempts: 3, within: 1h}\n", "    retry: {attempts: 20, within: 1h}\n", 1)
	d := newDashboardConfig(t, cfg)
	for range 40 {
		d.crm.Fail(sandbox.Fault{Status: 503, Message: "maintenance"})
	}
	const n = 6
	for i := range n {
		d.checkout(fmt.Sprintf("evt_p%d", i), fmt.Sprintf("enq-parked-%d", i), "")
	}
	parked := func() int {
		var k int
		if err := d.pool.QueryRow(t.Context(), `SELECT count(*) FROM actions WHERE destination = 'crm'
			AND parked_at IS NOT NULL AND state IN ('pending', 'retrying', 'uncertain')`).Scan(&k); err != nil {
			t.Fatal(err)
		}
		return k
	}
	deadline := time.Now().Add(60 * time.Second)
	for parked() < n && time.Now().Before(deadline) {
		time.Sleep(25 * time.Millisecond) // poll interval
	}
	if k := parked(); k != n {
		t.Fatalf("%d of the crm's %d actions are parked\n%s", k, n, tailOf(d.logs.String(), 3000))
	}
	// Every welcome mail is sent meanwhile: the mail destination is not held up.
	for i := range n {
		d.waitAction("send_welcome_email", fmt.Sprintf("enq-parked-%d", i), "confirmed")
	}

	admin := d.person()
	admin.login(adminEmail)
	page := admin.get("/queue/outstanding")
	if page.status != 200 {
		t.Fatalf("outstanding: %d %s", page.status, tailOf(page.body, 500))
	}
	if strings.Contains(page.body, "enq-parked-") {
		t.Errorf("the outstanding queue lists parked actions one row each:\n%s", tailOf(page.body, 3000))
	}
	causes := regexp.MustCompile(`(?s)<ul class="causes" id="queue-causes">.*?</ul>`).FindString(page.body)
	want := `href="/queue/outstanding?destination=crm&amp;parked=only">crm down since`
	if !strings.Contains(causes, want) || !strings.Contains(causes, fmt.Sprintf("<strong>%d</strong>", n)) {
		t.Errorf("the queue's causes do not show the crm's breaker with %d actions:\n%s", n, causes)
	}
	// The counts still hold them: a parked action stays in its state.
	total := regexp.MustCompile(`id="count-total"><strong>(\d+)`).FindStringSubmatch(page.body)
	if total == nil || total[1] != fmt.Sprint(n) {
		t.Errorf("the outstanding total is %v, want %d (the parked counted in their state)", total, n)
	}

	only := admin.get("/queue/outstanding?" + url.Values{"destination": {"crm"}, "parked": {"only"}}.Encode())
	for i := range n {
		if !strings.Contains(only.body, fmt.Sprintf("enq-parked-%d", i)) {
			t.Errorf("the parked view lacks enq-parked-%d:\n%s", i, tailOf(only.body, 3000))
		}
	}
	all := admin.get("/queue/outstanding?parked=all")
	if !strings.Contains(all.body, "enq-parked-0") {
		t.Errorf("parked=all leaves out the parked:\n%s", tailOf(all.body, 3000))
	}
	if bad := admin.get("/queue/outstanding?parked=maybe"); bad.status != 400 || !strings.Contains(bad.body, "parked is") {
		t.Errorf("parked=maybe: %d %s", bad.status, tailOf(bad.body, 500))
	}
	a := d.waitAction("open_opportunity", "enq-parked-0", "retrying")
	detail := admin.get(fmt.Sprintf("/actions/%d?client=%s", a.ID, a.Client))
	if !strings.Contains(detail.body, "Parked: crm down since") {
		t.Errorf("the action's page does not say it is parked:\n%s", tailOf(detail.body, 3000))
	}
}
