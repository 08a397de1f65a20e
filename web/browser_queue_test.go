package web_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// failedCheckouts makes n checkouts whose opportunity the CRM refuses (422), and
// returns the last one's action.
func (d *dashboard) failedCheckouts(prefix string, n int) ledger.Action {
	d.t.Helper()
	var a ledger.Action
	for i := range n {
		d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
		enq := fmt.Sprintf("%s-%d", prefix, i)
		d.checkout("evt_"+enq, enq, "")
		a = d.waitAction("open_opportunity", enq, ledger.StateFailed)
	}
	return a
}

// TestBrowserQueueTableFirst: a queue's filter and bulk acts are folded, so its
// first row is on the first screen at 1280x800 and at 390x844; the navigation
// holds on one row at 1280 with the queues' counts and an uncut search
// placeholder; /favicon.ico is served.
func TestBrowserQueueTableFirst(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.failedCheckouts("enq-fold-customer-2026-000123", 2)

	res, err := http.Get(d.url + "/favicon.ico")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.HasPrefix(res.Header.Get("Content-Type"), "image/") {
		t.Errorf("/favicon.ico: %d %q, want 200 and an image", res.StatusCode, res.Header.Get("Content-Type"))
	}

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	firstRowTop := `document.querySelector('#queue-table tbody tr').getBoundingClientRect().top`
	for _, size := range [][2]int64{{1280, 800}, {390, 844}} {
		b.do("viewport", chromedp.EmulateViewport(size[0], size[1]))
		for _, p := range []string{"/queue/failed", "/actions"} {
			b.open(p, "#queue-table tbody tr")
			if top := eval[float64](b, firstRowTop); top+20 > float64(size[1]) {
				t.Errorf("%s at %dx%d: the first row starts at %.0f px, below the fold", p, size[0], size[1], top)
			}
			b.screenshot(fmt.Sprintf("queue-%d%s", size[0], strings.ReplaceAll(p, "/", "-")))
		}
	}

	b.do("desktop", chromedp.EmulateViewport(1280, 800))
	b.open("/queue/failed", "#nav-failed")
	if tops := eval[int](b, `new Set([...document.querySelectorAll('header nav li, header nav .nav-search, header nav .nav-user')].map(e => Math.round(e.getBoundingClientRect().top / 20))).size`); tops != 1 {
		t.Errorf("the navigation takes %d rows at 1280 px, want 1", tops)
	}
	if got := b.text("#nav-failed .nav-count"); !strings.Contains(got, "2") {
		t.Errorf("the navigation's Failed count reads %q, want 2", got)
	}
	cut := eval[bool](b, `(() => { const i = document.querySelector('.nav-search input'); const c = document.createElement('canvas').getContext('2d');
		const st = getComputedStyle(i); c.font = st.fontSize + ' ' + st.fontFamily;
		return c.measureText(i.placeholder).width > i.clientWidth - parseFloat(st.paddingLeft) - parseFloat(st.paddingRight); })()`)
	if cut {
		t.Errorf("the search placeholder is cut: %s", eval[string](b, `(() => { const i = document.querySelector('.nav-search input'); return i.clientWidth + ' px for ' + i.placeholder; })()`))
	}
	b.open("/actions", "#queue-table tbody tr")
	if clipped := eval[bool](b, `(() => { const th = [...document.querySelectorAll('#queue-table th')].pop(); return th.getBoundingClientRect().right > document.querySelector('#queue-table .table-wrap').getBoundingClientRect().right + 1; })()`); clipped {
		t.Errorf("the Next action column is clipped on /actions at 1280 px")
	}
	if broken := eval[bool](b, `[...document.querySelectorAll('#queue-table td.mono span.key')].some(k => {
		const t = k.firstChild, r = document.createRange(); let top = null;
		for (let i = 0; i < t.length; i++) {
			r.setStart(t, i); r.setEnd(t, i + 1);
			const y = Math.round(r.getBoundingClientRect().top);
			if (top !== null && y > top && !'-_/:.'.includes(t.data[i - 1])) return true;
			top = y;
		}
		return false; })`); broken {
		t.Errorf("a business key breaks across lines")
	}
	// The overview groups the failed actions by cause, with the fix beside it.
	b.open("/", "#causes-failed")
	if got := b.text("#causes-failed"); !strings.Contains(got, "crm refused the request: 2 failed") || !strings.Contains(got, "Correct it, then Retry") {
		t.Errorf("the overview's failed causes read %q", got)
	}
	b.open("/queue/failed", "#queue-causes")
	if got := b.text("#queue-causes"); !strings.Contains(got, "crm refused the request: 2 failed") {
		t.Errorf("the failed queue's causes read %q", got)
	}
}

// TestBrowserCountsFollowTheSearch: after a search the totals are the search's,
// refreshed with the table, not the whole queue's.
func TestBrowserCountsFollowTheSearch(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	for _, enq := range []string{"enq-count-a", "enq-count-b", "enq-other-c"} {
		d.checkout("evt_"+enq, enq, "")
		d.waitAction("open_opportunity", enq, ledger.StateConfirmed)
	}
	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/actions", "#count-total")
	if got := b.text("#count-total"); !strings.Contains(got, "6 in all") {
		t.Fatalf("before the search the total reads %q, want 6 in all", got)
	}
	b.do("open the filter", chromedp.Click(chromedp.CSS(`#filter-tool summary`)))
	b.do("search", chromedp.SendKeys(chromedp.ID("f-q"), "enq-count-a"))
	waitUntil(t, "the table to show the search", func() bool {
		return eval[int](b, `document.querySelectorAll('#queue-table tbody tr').length`) == 2
	})
	waitUntil(t, "the totals to follow the search", func() bool { return strings.Contains(b.text("#count-total"), "2 match") })
	rows := eval[int](b, `document.querySelectorAll('#queue-table tbody tr').length`)
	var sum int
	for _, st := range ledger.AllStates {
		if got := eval[string](b, `(document.querySelector('#count-state-`+st+`') || {textContent: ''}).textContent`); got != "" {
			var n int
			fmt.Sscanf(regexp.MustCompile(`\d+`).FindString(got), "%d", &n)
			sum += n
		}
	}
	if sum != rows {
		t.Errorf("the state counts add up to %d, the table shows %d rows", sum, rows)
	}
}

// TestBrowserLiveAfterTickUntick: ticking a row pauses the queue's updates and
// says why; unticking it lets them go on, and a new row shows without a reload.
func TestBrowserLiveAfterTickUntick(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	first := d.failedCheckouts("enq-tick", 1)
	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/queue/failed", fmt.Sprintf("#pick-%d", first.ID))
	_ = eval[bool](b, `window.notReloaded = true`)
	pick := fmt.Sprintf("#pick-%d", first.ID)
	b.do("tick", chromedp.Click(chromedp.CSS(pick)))
	if got := b.text("#live-age"); !strings.Contains(got, "paused while 1 row is ticked") {
		t.Errorf("with a row ticked the status reads %q", got)
	}
	b.do("untick", chromedp.Click(chromedp.CSS(pick)))
	if got := b.text("#live-age"); !strings.HasPrefix(got, "updated") {
		t.Errorf("with the row unticked the status reads %q", got)
	}
	if got := b.text("#live-pause"); got != "Pause updates" {
		t.Errorf("the button reads %q", got)
	}
	next := d.failedCheckouts("enq-tick-later", 1)
	waitUntil(t, "the new failed row to show", func() bool {
		return eval[bool](b, fmt.Sprintf(`!!document.getElementById('pick-%d')`, next.ID))
	})
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Errorf("the page reloaded")
	}
}

// TestBrowserSearchByWhatPeopleKnow: the search box finds an action by the
// customer's email, by an amount and by words of its reason.
func TestBrowserSearchByWhatPeopleKnow(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.checkout("evt_email", "enq-email", "")
	mail := d.waitAction("send_welcome_email", "enq-email", ledger.StateConfirmed)
	opp := d.waitAction("open_opportunity", "enq-email", ledger.StateConfirmed)
	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/", ".nav-search input")
	b.do("search by email", chromedp.SendKeys(chromedp.CSS(".nav-search input"), "Ada@Example.com\n"))
	waitUntil(t, "the results", func() bool { return strings.HasPrefix(b.location(), "/actions") })
	b.open(b.location(), "main")
	if !eval[bool](b, fmt.Sprintf(`!!document.getElementById('open-%d')`, mail.ID)) {
		t.Errorf("a search by the customer's email does not find the welcome email: %s", b.text("main"))
	}
	b.open("/actions?q=4200", "main")
	if !eval[bool](b, fmt.Sprintf(`!!document.getElementById('open-%d')`, opp.ID)) {
		t.Errorf("a search by the amount does not find the opportunity: %s", b.text("main"))
	}
	failed := d.failedCheckouts("enq-reason", 1)
	b.open("/actions?q=Must+Be+Approved", "main")
	if !eval[bool](b, fmt.Sprintf(`!!document.getElementById('open-%d')`, failed.ID)) {
		t.Errorf("a search by words of the reason does not find the failed action: %s", b.text("main"))
	}
}

// deliver posts body as a signed Stripe webhook and fails the test unless it is
// accepted.
func (d *dashboard) deliver(body string) {
	d.t.Helper()
	d.post([]byte(body))
}

// TestBrowserConflictFilterFindsChangedPayload: the demo's changed payload (the
// same event id, amount 1200 then 9999) is found by the conflict filter, though
// its event was routed, and its page marks the changed value.
func TestBrowserConflictFilterFindsChangedPayload(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	body := func(amount int) string {
		return fmt.Sprintf(`{"id":"evt_changed","type":"checkout.session.completed","created":1700000000,`+
			`"data":{"object":{"id":"cs_changed","amount_total":%d,"customer_details":{"email":"ada@example.com"},`+
			`"metadata":{"enquiry_id":"enq-changed"}}}}`, amount)
	}
	d.deliver(body(1200))
	d.waitAction("open_opportunity", "enq-changed", ledger.StateConfirmed)
	d.deliver(body(9999))
	page, err := d.review.ListEvents(t.Context(), review.EventFilter{Q: "evt_changed"})
	if err != nil || len(page.Events) != 1 || !page.Events[0].Conflict {
		t.Fatalf("the changed payload is not flagged: %v %+v", err, page.Events)
	}
	ev := page.Events[0]

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/events?status=conflict", "main")
	if !eval[bool](b, fmt.Sprintf(`!!document.querySelector('a[href^="/events/%d?"]')`, ev.ID)) {
		t.Errorf("/events?status=conflict does not list event %d (status %s, conflict flag set): %s", ev.ID, ev.Status, b.text("main"))
	}
	b.open(fmt.Sprintf("/events/%d", ev.ID), "#conflict-diff-0")
	diff := b.text("#conflict-diff-0 tbody")
	if !strings.Contains(diff, "/data/object/amount_total") || !strings.Contains(diff, "1200") || !strings.Contains(diff, "9999") {
		t.Errorf("the diff reads %q, want amount_total 1200 against 9999", diff)
	}
	if n := eval[int](b, `document.querySelectorAll('#conflict-diff-0 tbody tr').length`); n != 1 {
		t.Errorf("the diff lists %d values, want the one that changed", n)
	}
	if !eval[bool](b, `[...document.querySelectorAll('#conflict-diff-0 td.differs')].some(td => td.textContent.includes('9999'))`) {
		t.Errorf("the changed value is not marked")
	}
	b.screenshot("event-conflict")
}

// TestBrowserPlainWords: a reason reads as a sentence, the stored text behind a
// disclosure; the trends say what they count.
func TestBrowserPlainWords(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	a := d.failedCheckouts("enq-words", 1)
	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/queue/failed", fmt.Sprintf("#open-%d", a.ID))
	reason := eval[string](b, `document.querySelector('#queue-table td.reason').firstChild.textContent.trim()`)
	if !strings.HasPrefix(reason, "crm refused the request") || !strings.Contains(reason, "amount must be approved") {
		t.Errorf("the reason reads %q, want a sentence naming crm and its words", reason)
	}
	if eval[bool](b, `[...document.querySelectorAll('#queue-table td.reason')].some(td => td.innerText.includes('(4xx)'))`) {
		t.Errorf("the stored reason shows before it is asked for")
	}
	if got := eval[string](b, `document.querySelector('#queue-table td.reason details code').textContent`); !strings.Contains(got, string(ledger.ObsRejected)) {
		t.Errorf("the disclosure holds %q, want the stored reason", got)
	}
	b.open("/trends?window=hour", "#trend-dest-note")
	if got := b.text("main"); strings.Contains(got, "one 5 minutes") || !strings.Contains(got, "Each bar is five minutes") ||
		!strings.Contains(got, "failed calls") || !strings.Contains(b.text("#trend-dest-note"), "not the Failed queue") {
		t.Errorf("the trends read %q", got)
	}
}
