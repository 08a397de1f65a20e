package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
)

// TestBrowserKeyboardTriage works a queue of five failed actions with the
// keyboard alone in Chromium: ? lists the keys, j and k move with a visible
// focus on the row's link, x ticks, a assigns to me (with an Undo), r opens
// Retry's confirmation, Enter opens the action, / goes to the search, and a
// key typed in the search moves nothing. The ledger's and the CRM's records
// say what each key did.
func TestBrowserKeyboardTriage(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.failedCheckouts("enq-kb", 5)
	page, err := d.review.ListActions(t.Context(), review.ActionFilter{States: []string{ledger.StateFailed}, Limit: 10})
	if err != nil || len(page.Actions) != 5 {
		t.Fatalf("the failed queue holds %d actions (%v), want 5", len(page.Actions), err)
	}
	rows := page.Actions // the queue's order: newest first
	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	press := func(keys ...string) {
		for _, k := range keys {
			b.do("press "+k, chromedp.KeyEvent(k))
		}
	}
	focused := func() string { return eval[string](b, `document.activeElement ? document.activeElement.id : ''`) }
	queue := func() { b.open("/queue/failed", "#queue-table tbody tr[data-id]") }
	ticked := func(id int64) bool {
		return eval[bool](b, fmt.Sprintf(`document.getElementById('pick-%d').checked`, id))
	}

	// ? lists the keys; Esc closes the list.
	queue()
	press("?")
	if !eval[bool](b, `document.getElementById('keys').open`) || !strings.Contains(b.text("#keys"), "assign the row's action to me") {
		t.Fatal("? does not list the keys")
	}
	b.screenshot("queue-keys")
	press(kb.Escape)
	if eval[bool](b, `document.getElementById('keys').open`) {
		t.Fatal("Esc does not close the list of keys")
	}

	// 1: j to the first row, a assigns it to me; the message offers Undo.
	press("j")
	if got := focused(); got != fmt.Sprintf("open-%d", rows[0].ID) {
		t.Fatalf("after j the focus is on %q, want the first row's link", got)
	}
	if !eval[bool](b, `document.querySelector('#queue-table tr.kb-focus') !== null && getComputedStyle(document.querySelector('#queue-table tr.kb-focus')).outlineStyle !== 'none'`) {
		t.Error("the focused row shows no outline")
	}
	b.do("assign to me", chromedp.KeyEvent("a"), chromedp.WaitVisible(chromedp.ID("undo")))
	if got := d.state(rows[0].ID); got.Owner != adminEmail {
		t.Errorf("after a the owner is %q, want %s", got.Owner, adminEmail)
	}

	// 2 and 3: down to them, x ticks each, k back up moves the focus back.
	queue()
	press("j", "j", "x", "j", "x", "k")
	if !ticked(rows[1].ID) || !ticked(rows[2].ID) || ticked(rows[0].ID) {
		t.Errorf("after j j x j x the ticks are %v %v %v, want the second and third", ticked(rows[0].ID), ticked(rows[1].ID), ticked(rows[2].ID))
	}
	if got := focused(); got != fmt.Sprintf("open-%d", rows[1].ID) {
		t.Errorf("after k the focus is on %q, want the second row", got)
	}
	if s := b.text("#kb-status"); !strings.HasPrefix(s, "Ticked ") {
		t.Errorf("the status says %q after a tick", s)
	}

	// 4: r opens its Retry confirmation; Enter on the confirm button retries it.
	queue()
	press("j", "j", "j", "j", "r")
	b.do("see the confirmation", chromedp.WaitVisible(chromedp.ID("confirm-retry")))
	if loc := b.location(); !strings.HasPrefix(loc, fmt.Sprintf("/actions/%d/retry", rows[3].ID)) {
		t.Fatalf("r opened %s, want the fourth action's retry confirmation", loc)
	}
	b.do("confirm with Enter", chromedp.Focus(chromedp.ID("confirm-retry")), chromedp.KeyEvent("\r"),
		chromedp.WaitVisible(chromedp.CSS(".flash")))
	d.waitAction("open_opportunity", rows[3].BusinessKey, ledger.StateConfirmed)
	if n := d.crm.CountByRef(rows[3].OperationKey); n != 1 {
		t.Errorf("the CRM holds %d records of the retried action, want 1", n)
	}

	// 5: j past the end stays on the last row; Enter opens it.
	queue()
	press("j", "j", "j", "j", "j", "j", "j")
	last := eval[string](b, `document.activeElement.id`)
	b.do("open with Enter", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.ID("operation-key")))
	if loc := b.location(); !strings.HasPrefix(loc, "/actions/") || "open-"+strings.TrimPrefix(strings.SplitN(loc, "?", 2)[0], "/actions/") != last {
		t.Errorf("Enter on %s opened %s", last, loc)
	}

	// / goes to the search; a j typed there is text, not a move.
	queue()
	press("/")
	if got := focused(); got != "f-q" {
		t.Fatalf("after / the focus is on %q, want the search", got)
	}
	press("j")
	if got, v := focused(), eval[string](b, `document.getElementById('f-q').value`); got != "f-q" || v != "j" ||
		eval[bool](b, `document.querySelector('#queue-table tr.kb-focus') !== null`) {
		t.Errorf("a j typed in the search: focus %q, value %q", got, v)
	}
}
