package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserHistoryAndSearch: the all-actions list shows every state with its
// count, the search in the navigation looks in every queue (event id, owner),
// reason, HTTP status and time filters narrow it, and CSV export holds exactly
// what the filter selects.
func TestBrowserHistoryAndSearch(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.checkout("evt_hist_ok", "enq-hist-ok", "")
	ok := d.waitAction("open_opportunity", "enq-hist-ok", ledger.StateConfirmed)
	// The first checkout's mail goes out before the mail fault is set, so that the
	// fault meets the second checkout's.
	d.waitAction("send_welcome_email", "enq-hist-ok", ledger.StateConfirmed)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_hist_bad", "enq-hist-bad", "")
	bad := d.waitAction("open_opportunity", "enq-hist-bad", ledger.StateFailed)
	mail := d.waitAction("send_welcome_email", "enq-hist-bad", ledger.StateFailed)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/actions", "#state-counts")
	if got := b.text("#count-state-confirmed"); !strings.HasSuffix(got, "2") {
		t.Errorf("confirmed count reads %q, want 2", got)
	}
	if got := b.text("#count-state-failed"); !strings.HasSuffix(got, "2") {
		t.Errorf("failed count reads %q, want 2", got)
	}
	link := func(id int64) string { return fmt.Sprintf(`#queue-table a[href^="/actions/%d?"]`, id) }
	shows := func(id int64) bool { return eval[bool](b, `document.querySelector('`+link(id)+`') !== null`) }
	rows := func() int { return eval[int](b, `document.querySelectorAll('#queue-table tbody tr').length`) }
	if n := rows(); n != 4 {
		t.Errorf("all actions shows %d rows, want 4", n)
	}
	b.submit("#count-state-confirmed")
	if n := rows(); n != 2 || !shows(ok.ID) || shows(bad.ID) {
		t.Errorf("the confirmed count leads to %d rows", n)
	}

	// The navigation's search looks in every queue: an event id, then an owner.
	b.do("search an event id", chromedp.SendKeys(chromedp.CSS(`.nav-search input`), "evt_hist_bad\n"))
	waitUntil(t, "the search", func() bool { return strings.Contains(b.location(), "q=evt_hist_bad") })
	b.do("rows", chromedp.WaitVisible(chromedp.CSS("#queue-table")))
	if n := rows(); n != 2 || !shows(bad.ID) || !shows(mail.ID) {
		t.Errorf("searching the event id shows %d rows", n)
	}
	b.open("/actions?q=sales-ops%40example.com", "#queue-table")
	if n := rows(); n != 2 || !shows(ok.ID) || !shows(bad.ID) {
		t.Errorf("searching an owner shows %d rows", n)
	}

	// Reason, HTTP status and time.
	for _, c := range []struct {
		query string
		want  []int64
	}{
		{"reason=mailbox", []int64{mail.ID}},
		{"http_status=422", []int64{bad.ID}},
		{"http_status=550&state=failed", []int64{mail.ID}},
		{"until=2000-01-01", nil},
		{"since=2000-01-01T00:00&state=failed", []int64{mail.ID, bad.ID}},
	} {
		b.open("/actions?"+c.query, "#queue-table")
		if n := rows(); n != len(c.want) {
			t.Errorf("%s: %d rows, want %d", c.query, n, len(c.want))
		}
		for _, id := range c.want {
			if !shows(id) {
				t.Errorf("%s: action %d missing", c.query, id)
			}
		}
	}

	// CSV export of a filter: its rows and nothing else.
	b.open("/actions?state=failed", "#export-csv")
	csv := eval[string](b, `fetch(document.getElementById('export-csv').href).then(r => r.text())`)
	lines := strings.Split(strings.TrimSpace(csv), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "id,state,action,business_key") {
		t.Fatalf("CSV of the failed actions:\n%s", csv)
	}
	for _, l := range lines[1:] {
		if !strings.Contains(l, ",failed,") {
			t.Errorf("CSV row not failed: %s", l)
		}
	}
	// Queues have totals too.
	b.open("/queue/failed", "#state-counts")
	if got := b.text("#state-counts"); !strings.Contains(got, "2 in all") {
		t.Errorf("the failed queue's totals read %q", got)
	}
}
