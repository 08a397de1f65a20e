package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserReviewWorkflow is the review workflow as two people do it in a
// browser: an admin assigns a failed action to an operator, who finds it under
// /mine and retries it through the confirmation step; the CRM then sees the
// original operation key again.
func TestBrowserReviewWorkflow(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	evID := d.checkout("evt_flow", "enq-flow", "first order")
	a := d.waitAction("open_opportunity", "enq-flow", ledger.StateFailed)
	// The first checkout's own welcome mail goes out first, so that the mail fault
	// below meets the second checkout's, not this one's.
	d.waitAction("send_welcome_email", "enq-flow", ledger.StateConfirmed)
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_other", "enq-other", "second order")
	d.waitAction("send_welcome_email", "enq-other", ledger.StateFailed)
	actionPath := fmt.Sprintf("/actions/%d", a.ID)
	actionLink := fmt.Sprintf(`#queue-table a[href^="%s?"]`, actionPath)

	b := newBrowser(t, d.url)

	// Signed out, a queue sends the person to the sign-in form.
	b.open("/queue/failed", "#email")
	if loc := b.location(); !strings.HasPrefix(loc, "/login?next=") {
		t.Fatalf("signed out, /queue/failed ended at %s, want /login?next=...", loc)
	}
	b.screenshot("login")

	// A wrong password gets plain words and the form again.
	b.do("type a wrong password", chromedp.SendKeys(chromedp.ID("email"), adminEmail),
		chromedp.SendKeys(chromedp.ID("password"), "not my password"))
	b.submit(`form[action="/login"] button[type=submit]`)
	if msg := b.text("#login-error"); msg != "The email or password is wrong." {
		t.Fatalf("wrong password says %q", msg)
	}

	// The right one lands on the page the person asked for.
	b.do("type the password", chromedp.SendKeys(chromedp.ID("password"), password))
	b.submit(`form[action="/login"] button[type=submit]`)
	if loc := b.location(); loc != "/queue/failed" {
		t.Fatalf("after signing in: %s, want /queue/failed", loc)
	}
	b.do("see the failed action", chromedp.WaitVisible(chromedp.CSS(actionLink)))
	b.screenshot("queue-failed")
	// At 1280 px the whole queue table fits: no column is hidden off to the right.
	if over := eval[int](b, `(() => { const w = document.querySelector('#queue-table .table-wrap');
		return w.scrollWidth - w.clientWidth })()`); over > 0 {
		t.Errorf("the queue table is %d px wider than its box at 1280 px: the last columns are hidden", over)
	}

	// The filter works through htmx without a page load, and the URL keeps it.
	b.unfold()
	b.do("filter", chromedp.SendKeys(chromedp.ID("f-q"), "enq-other"), chromedp.Click(chromedp.CSS(`form[role=search] button`)))
	waitUntil(t, "the filter to apply", func() bool {
		return strings.Contains(b.location(), "q=enq-other") && eval[int](b, `document.querySelectorAll('`+actionLink+`').length`) == 0
	})
	b.open("/queue/failed", actionLink)

	// The admin assigns it to the operator.
	b.submit(actionLink)
	b.do("pick the operator", chromedp.WaitVisible(chromedp.ID("assign")), chromedp.SetValue(chromedp.ID("assign-owner"), opsEmail))
	b.submit("#assign")
	if owner := b.text("#owner"); owner != opsEmail {
		t.Fatalf("owner after Assign = %q, want %s", owner, opsEmail)
	}
	if flash := b.text(".flash"); flash != "Assigned to "+opsEmail+"." {
		t.Errorf("flash = %q", flash)
	}
	b.screenshot("action")
	b.open("/", "#count-failed")
	b.screenshot("overview")
	b.open("/events/"+evID, "#payload")
	b.screenshot("event")
	b.open("/sources", "table")
	b.screenshot("sources")
	b.open("/destinations", "table")
	b.screenshot("destinations")
	b.open("/users", "#new-email")
	b.screenshot("users")
	b.logout()
	if loc := b.location(); loc != "/login" {
		t.Fatalf("after signing out: %s", loc)
	}

	// The operator finds it under /mine.
	b.login(opsEmail, password)
	b.open("/mine", actionLink)
	b.screenshot("mine")
	b.submit(actionLink)
	b.do("see the action", chromedp.WaitVisible(chromedp.ID("retry")))
	if eval[bool](b, `document.getElementById('assign') !== null || [...document.querySelectorAll('button')].some(x => x.textContent.trim() === 'Assign')`) {
		t.Errorf("the operator sees an Assign button")
	}
	// A forged assign, with the operator's own session and token, is refused.
	forged := eval[int](b, `(async () => {
		const token = document.querySelector('input[name=csrf_token]').value;
		const r = await fetch('`+actionPath+`/assign', {method: 'POST',
			headers: {'Content-Type': 'application/x-www-form-urlencoded'},
			body: 'csrf_token=' + encodeURIComponent(token) + '&owner=ops%40example.com'});
		return r.status;
	})()`)
	if forged != 403 {
		t.Errorf("forged assign by an operator: status %d, want 403", forged)
	}

	// Retry goes through a confirmation step that shows the operation key.
	b.submit("#retry")
	if key := b.text("#confirm-key"); key != a.OperationKey {
		t.Fatalf("confirmation shows key %q, want %q", key, a.OperationKey)
	}
	b.screenshot("retry-confirm")
	b.submit("#confirm-retry")
	if flash := b.text(".flash"); !strings.HasPrefix(flash, "Retry requested with the same operation key") {
		t.Errorf("flash after retry = %q", flash)
	}
	d.waitAction("open_opportunity", "enq-flow", ledger.StateConfirmed)
	b.open(actionPath, "#operation-key")
	if state := b.text("hgroup .state"); state != ledger.StateConfirmed {
		t.Errorf("the page shows %q, want confirmed", state)
	}

	// The destination saw the original key on both calls, and holds one record.
	var posts []string
	for _, r := range d.crm.Requests() {
		if r.Method == "POST" {
			posts = append(posts, r.IdempotencyKey)
		}
	}
	if len(posts) < 2 {
		t.Errorf("the CRM got %d creates, want the refused one and the retry", len(posts))
	}
	for _, k := range posts {
		if k != a.OperationKey && !isOtherAction(d, k) {
			t.Errorf("the CRM got key %q, want the original %q", k, a.OperationKey)
		}
	}
	if n := d.crm.CountByRef(a.OperationKey); n != 1 {
		t.Errorf("the CRM holds %d records with the key, want 1", n)
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
	if v := b.cspViolations(); len(v) > 0 {
		t.Errorf("Content-Security-Policy violations:\n%s", strings.Join(v, "\n"))
	}
}

// isOtherAction reports whether key is the operation key of another action of the
// test (the second enquiry's opportunity).
func isOtherAction(d *dashboard, key string) bool {
	a := d.waitAction("open_opportunity", "enq-other", ledger.StateConfirmed)
	return a.OperationKey == key
}

// TestBrowserPayloadEscaped delivers a payload written to run script in the
// dashboard and checks that every page shows it as text and nothing runs.
func TestBrowserPayloadEscaped(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	evil := `<script>document.title='pwned';alert('script')</script><img src=x onerror=alert('img')>`
	key := `enq-<img src=x onerror=alert('key')>`
	evID := d.checkout("evt_xss", key, evil)
	a := d.waitAction("open_opportunity", key, ledger.StateConfirmed)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/events/"+evID, "#payload")
	payload := b.text("#payload")
	for _, want := range []string{"<script>document.title='pwned';alert('script')</script>", "onerror=alert('img')"} {
		if !strings.Contains(payload, want) {
			t.Errorf("the payload does not show %q as text:\n%s", want, payload)
		}
	}
	if n := eval[int](b, `document.querySelectorAll('#payload *, img, main script').length`); n != 0 {
		t.Errorf("the payload became %d elements", n)
	}
	if body := eval[string](b, `document.body.innerText`); !strings.Contains(body, key) {
		t.Errorf("the business key is not shown as text on the event page")
	}
	b.screenshot("event-escaped")
	b.open(fmt.Sprintf("/actions/%d", a.ID), "#operation-key")
	if h1 := b.text("h1"); !strings.Contains(h1, key) {
		t.Errorf("action heading = %q, want the key as text", h1)
	}
	if title := eval[string](b, `document.title`); title == "pwned" {
		t.Errorf("script from the payload ran")
	}
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
}

// waitUntil polls cond until it holds or a generous deadline passes.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(step)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
}
