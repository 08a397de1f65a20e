package web_test

import (
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserButtonsFollowWhatIsPossible: no Reconcile where the destination
// cannot be asked, a disconnected destination is named with who can reconnect
// it, a retry says it will wait, a refused retry promises nothing, and Cancel
// needs a confirmation.
func TestBrowserButtonsFollowWhatIsPossible(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_acts_1", "enq-acts-1", "")
	crmFailed := d.waitAction("open_opportunity", "enq-acts-1", ledger.StateFailed)
	mailFailed := d.waitAction("send_welcome_email", "enq-acts-1", ledger.StateFailed)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	has := func(sel string) bool { return eval[bool](b, `document.querySelector('`+sel+`') !== null`) }

	// SMTP has no lookup and no key memory: no Reconcile button, and why.
	b.open(fmt.Sprintf("/actions/%d", mailFailed.ID), "#retry")
	if has("#reconcile") {
		t.Errorf("a failed email offers Reconcile, which can find nothing out")
	}
	if plan := b.text("#reconcile-plan"); !strings.Contains(plan, "no lookup") || !strings.Contains(plan, "by hand") {
		t.Errorf("the email's page says %q about Reconcile", plan)
	}
	// The CRM remembers keys: Reconcile says it resends with the same key.
	b.open(fmt.Sprintf("/actions/%d", crmFailed.ID), "#reconcile")
	if plan := b.text("#reconcile-plan"); !strings.Contains(plan, "same key") {
		t.Errorf("the CRM action's Reconcile says %q", plan)
	}

	// A refused retry (the email: nothing can tell whether it went) promises nothing.
	b.open(fmt.Sprintf("/actions/%d/retry", mailFailed.ID), "#confirm-retry")
	b.do("retry without checking", chromedp.RemoveAttribute(chromedp.ID("checked"), "required"),
		chromedp.RemoveAttribute(chromedp.ID("retry-note"), "required"))
	b.submit("#confirm-retry")
	body := eval[string](b, `document.querySelector('main').innerText`)
	if !strings.Contains(body, "Nothing was sent") || strings.Contains(body, "will send") {
		t.Errorf("a refused retry says:\n%s", body)
	}

	// The CRM refuses its credentials: it is disconnected and the next action is held.
	d.crm.Fail(sandbox.Fault{Status: 401, Message: "token revoked"})
	d.checkout("evt_acts_2", "enq-acts-2", "")
	held := d.waitAction("open_opportunity", "enq-acts-2", ledger.StateHeld)
	b.open(fmt.Sprintf("/actions/%d", crmFailed.ID), "#disconnected")
	if note := b.text("#disconnected"); !strings.Contains(note, "crm is disconnected") {
		t.Errorf("the disconnected notice says %q", note)
	}
	if href := eval[string](b, `document.getElementById('reconnect-link').getAttribute('href')`); href != "/destinations#dest-crm" {
		t.Errorf("the admin's Reconnect link goes to %q", href)
	}
	if w := b.text("#retry-waits"); !strings.Contains(w, "waits until it is reconnected") {
		t.Errorf("Retry says %q while crm is disconnected", w)
	}
	b.screenshot("action-disconnected")
	// The badge says it in words and in its own colour; the held count links to them.
	b.open("/destinations", "#dest-crm")
	if got := b.text("#dest-crm .state"); got != "disconnected" {
		t.Errorf("badge = %q", got)
	}
	if bg := eval[string](b, `getComputedStyle(document.querySelector('#dest-crm .state')).backgroundColor`); bg ==
		eval[string](b, `getComputedStyle(document.querySelector('#dest-mail .state')).backgroundColor`) {
		t.Errorf("connected and disconnected badges share the colour %s", bg)
	}
	b.submit(`#dest-crm a[href*="state=held"]`)
	if loc := b.location(); !strings.Contains(loc, "destination=crm") || !strings.Contains(loc, "state=held") {
		t.Errorf("the held count leads to %s", loc)
	}
	if !has(fmt.Sprintf(`#queue-table a[href^="/actions/%d?"]`, held.ID)) || has(fmt.Sprintf(`#queue-table a[href^="/actions/%d?"]`, crmFailed.ID)) {
		t.Errorf("the held list does not show exactly the held action")
	}

	// An operator is told who can reconnect it.
	ops := newBrowser(t, d.url)
	ops.login(opsEmail, password)
	ops.open(fmt.Sprintf("/actions/%d", held.ID), "#disconnected")
	if note := ops.text("#disconnected"); !strings.Contains(note, "An admin or crm-admin@example.com can reconnect it") {
		t.Errorf("the operator's notice says %q", note)
	}

	// Cancel asks first, and says it cannot be undone.
	b.open(fmt.Sprintf("/actions/%d", crmFailed.ID), "#cancel")
	if lbl := b.text(`label[for=cancel-confirm]`); !strings.Contains(lbl, "cannot be undone") {
		t.Errorf("the Cancel confirmation reads %q", lbl)
	}
	b.do("press Cancel without confirming", chromedp.Click(chromedp.ID("cancel")))
	if got, _ := d.review.GetAction(t.Context(), crmFailed.ID); got.Action.State != ledger.StateFailed {
		t.Fatalf("Cancel without the confirmation left it %s", got.Action.State)
	}
	// Even a form sent without the browser's check cancels nothing.
	p := d.person()
	p.login(adminEmail)
	path := fmt.Sprintf("/actions/%d", crmFailed.ID)
	if r := p.post(path, path+"/cancel", url.Values{"note": {"dup"}}); r.status != 400 {
		t.Errorf("cancel without confirm: %d", r.status)
	}
	b.do("confirm", chromedp.Click(chromedp.ID("cancel-confirm")))
	b.submit("#cancel")
	if got, _ := d.review.GetAction(t.Context(), crmFailed.ID); got.Action.State != ledger.StateCancelled {
		t.Errorf("confirmed Cancel left it %s", got.Action.State)
	}
}

// TestBrowserNoDeadEnds: a 404 inside the app keeps the navigation, and after
// Resolve the page links to the next action of the queue.
func TestBrowserNoDeadEnds(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	var failed []ledger.Action
	for i := range 2 {
		d.crm.Fail(sandbox.Fault{Status: 422})
		d.checkout(fmt.Sprintf("evt_next_%d", i), fmt.Sprintf("enq-next-%d", i), "")
		failed = append(failed, d.waitAction("open_opportunity", fmt.Sprintf("enq-next-%d", i), ledger.StateFailed))
	}
	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	for _, p := range []string{"/no/such/page", "/actions/999999"} {
		b.open(p, "main h1")
		if h := b.text("main h1"); h != "Not found" {
			t.Errorf("%s: heading %q", p, h)
		}
		if !eval[bool](b, `document.querySelector('nav a[href="/queue/failed"]') !== null`) {
			t.Errorf("%s: the 404 page has no navigation", p)
		}
	}
	// Working the failed queue newest first: resolve the newer, go on to the older.
	b.open(fmt.Sprintf("/actions/%d", failed[1].ID), "#resolve")
	b.do("note", chromedp.SendKeys(chromedp.ID("resolve-note"), "done by hand"))
	b.submit("#resolve")
	if href := eval[string](b, `document.getElementById('next-link').getAttribute('href')`); !strings.HasPrefix(href, fmt.Sprintf("/actions/%d", failed[0].ID)) {
		t.Fatalf("after Resolve the next link goes to %q, want action %d", href, failed[0].ID)
	}
	b.submit("#next-link")
	b.do("cancel the other", chromedp.Click(chromedp.ID("cancel-confirm")))
	b.submit("#cancel")
	if got := b.text("#next-in-queue"); !strings.Contains(got, "The failed queue is empty") {
		t.Errorf("after the last one: %q", got)
	}
}
