package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserExpiredSessionKeepsTheWork: a form sent after the session expired
// leads to sign-in and back to the form with what was typed, not to a refusal;
// nothing is done until the person sends it again.
func TestBrowserExpiredSessionKeepsTheWork(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.checkout("evt_expire", "enq-expire", "")
	a := d.waitAction("open_opportunity", "enq-expire", ledger.StateFailed)
	path := fmt.Sprintf("/actions/%d", a.ID)
	note := "Settled by phone with Ada; the CRM record is OPP-7"

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open(path, "#resolve-note")
	b.do("type a long note", chromedp.SendKeys(chromedp.ID("resolve-note"), note),
		chromedp.SendKeys(chromedp.ID("resolve-ref"), "OPP-7"))
	// The session ends while the person types (idle timeout, or a restart that
	// lost it): the store no longer knows it.
	if _, err := d.pool.Exec(t.Context(), `DELETE FROM sessions`); err != nil {
		t.Fatal(err)
	}
	b.submit("#resolve")
	if loc := b.location(); !strings.HasPrefix(loc, "/login?next=") {
		t.Fatalf("a form sent after the session expired ended at %s, want the sign-in form", loc)
	}
	if msg := b.text(".flash"); !strings.Contains(msg, "what you typed is kept") {
		t.Errorf("the sign-in page says %q", msg)
	}
	if got, _ := d.review.GetAction(t.Context(), a.ID); got.Action.State != ledger.StateFailed {
		t.Fatalf("the expired form was acted on: %s", got.Action.State)
	}
	b.do("sign in", chromedp.SendKeys(chromedp.ID("email"), adminEmail), chromedp.SendKeys(chromedp.ID("password"), password))
	b.submit(`form[action="/login"] button[type=submit]`)
	if loc := b.location(); loc != path {
		t.Fatalf("after signing in: %s, want back at %s", loc, path)
	}
	b.do("see the note back", chromedp.WaitVisible(chromedp.ID("kept-note")))
	if got := eval[string](b, `document.getElementById('resolve-note').value`); got != note {
		t.Fatalf("the note is %q after signing in, want what was typed", got)
	}
	if got := eval[string](b, `document.getElementById('resolve-ref').value`); got != "OPP-7" {
		t.Errorf("the external ref is %q after signing in", got)
	}
	b.screenshot("kept-form")
	b.submit("#resolve")
	got, _ := d.review.GetAction(t.Context(), a.ID)
	if got.Action.State != ledger.StateResolved || !strings.Contains(got.Action.Reason, note) || got.Action.ExternalRef != "OPP-7" {
		t.Errorf("after sending it again: %s %q %q", got.Action.State, got.Action.Reason, got.Action.ExternalRef)
	}
	// Reloading the page offers nothing again: the kept form was used up.
	b.open(path, "#operation-key")
	if eval[bool](b, `document.getElementById('kept-form') !== null`) {
		t.Errorf("the kept form is offered again after it was used")
	}
}
