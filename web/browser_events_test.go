package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
)

// deliverType posts a signed Stripe event of typ, which no rule may know.
func (d *dashboard) deliverType(eventID, typ string) {
	d.t.Helper()
	d.post([]byte(`{"id":"` + eventID + `","type":"` + typ + `","created":1700000000,"data":{"object":{"id":"in_1"}}}`))
}

// waitStatus polls until the event with the provider's id has status want.
func (d *dashboard) waitStatus(sourceEventID, want string) ledger.Event {
	d.t.Helper()
	var last ledger.Event
	waitUntil(d.t, "event "+sourceEventID+" to be "+want, func() bool {
		page, err := d.review.ListEvents(context.Background(), review.EventFilter{Q: sourceEventID})
		if err != nil {
			d.t.Fatal(err)
		}
		if len(page.Events) == 1 {
			last = page.Events[0]
		}
		return last.Status == want
	})
	return last
}

// TestBrowserEventsListAndReplay: an admin filters the events list down to what
// started nothing, reads why, replays one event from its page and then all that
// match after confirming the count.
func TestBrowserEventsListAndReplay(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.checkout("evt_list_1", "enq-list-1", "kept")
	d.deliverType("evt_unknown_1", "invoice.paid")
	d.deliverType("evt_unknown_2", "invoice.paid")
	d.waitAction("open_opportunity", "enq-list-1", ledger.StateConfirmed)
	ignored := d.waitStatus("evt_unknown_1", ledger.EventIgnored)
	d.waitStatus("evt_unknown_2", ledger.EventIgnored)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/events", "#events")
	if n := eval[int](b, `document.querySelectorAll('#events tbody tr').length`); n != 3 {
		t.Fatalf("/events lists %d rows, want 3", n)
	}

	// Filter: ignored events of that type, through the form.
	b.do("filter ignored", chromedp.SetValue(chromedp.ID("e-status"), "ignored"),
		chromedp.SendKeys(chromedp.ID("e-type"), "invoice.paid"))
	b.submit("#filter")
	if loc := b.location(); !strings.Contains(loc, "status=ignored") || !strings.Contains(loc, "type=invoice.paid") {
		t.Errorf("after filtering: %s", loc)
	}
	if n := eval[int](b, `document.querySelectorAll('#events tbody tr').length`); n != 2 {
		t.Fatalf("ignored invoice.paid rows = %d, want 2", n)
	}
	b.screenshot("events")
	if why := b.text("#events tbody tr .reason"); !strings.Contains(why, `no action rule for event type "invoice.paid"`) {
		t.Errorf("why = %q", why)
	}
	// Nothing came by backfill; a search by the provider's id finds exactly one.
	b.open("/events?via=backfill", "#no-events")
	b.open("/events?q=evt_unknown_2", "#events")
	if n := eval[int](b, `document.querySelectorAll('#events tbody tr').length`); n != 1 || !strings.Contains(b.text("#events tbody"), "evt_unknown_2") {
		t.Errorf("search by event id found %d rows", n)
	}

	// The event page says why it started nothing, and replays it.
	b.open(fmt.Sprintf("/events/%d", ignored.ID), "#started-nothing")
	if s := b.text("#started-nothing"); !strings.Contains(s, "It started nothing: no action rule") {
		t.Errorf("started nothing = %q", s)
	}
	if via := b.text("#event-via"); via != "webhook" {
		t.Errorf("via = %q", via)
	}
	b.do("say why", chromedp.SendKeys(chromedp.ID("replay-note"), "checking the new rule"))
	b.submit("#replay")
	if flash := b.text(".flash"); !strings.HasPrefix(flash, "Replay requested") {
		t.Errorf("flash after replay = %q", flash)
	}
	d.waitStatus("evt_unknown_1", ledger.EventIgnored)
	b.open(fmt.Sprintf("/events/%d", ignored.ID), "#event-audit")
	if line := b.text("#event-audit tbody tr"); !strings.Contains(line, adminEmail) || !strings.Contains(line, "replay") ||
		!strings.Contains(line, "checking the new rule") {
		t.Errorf("audit line = %q", line)
	}
	b.screenshot("event-replayed")

	// Replay all that match: the count first, then the confirmation.
	b.open("/events?status=ignored&type=invoice.paid", "#replay-all")
	b.submit("#replay-all")
	if n := b.text("#replay-count"); !strings.HasPrefix(n, "2 events match") {
		t.Fatalf("confirmation says %q", n)
	}
	b.do("say why", chromedp.SendKeys(chromedp.ID("replay-note"), "all of them"))
	b.submit("#confirm-replay")
	if flash := b.text(".flash"); !strings.HasPrefix(flash, "2 events replayed") {
		t.Errorf("flash after replay all = %q", flash)
	}
	if n := countRows(t, d, `SELECT count(*) FROM event_audit WHERE note = 'all of them'`); n != 2 {
		t.Errorf("%d audit lines for replay all, want 2", n)
	}
	if got := d.crm.Len(); got != 1 {
		t.Errorf("CRM records = %d, want 1 (the checkout's, never repeated)", got)
	}

	// An operator sees the list, but not the replay of all that match.
	b.logout()
	b.login(opsEmail, password)
	b.open("/events", "#events")
	if n := eval[int](b, `document.querySelectorAll('#replay-all').length`); n != 0 {
		t.Errorf("an operator is offered replay all")
	}
	if v := b.cspViolations(); len(v) > 0 {
		t.Errorf("CSP violations: %v", v)
	}
}

func countRows(t *testing.T, d *dashboard, sql string) int {
	t.Helper()
	var n int
	if err := d.pool.QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
