package web_test

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserUndoAssignAndSnooze: the message confirming an assign or a snooze
// offers Undo for a few seconds; it puts back the owner or the snooze it
// replaced, audited. An act that reaches a destination offers none and says so;
// an undo too late, or of someone else's act, is refused in words.
func TestBrowserUndoAssignAndSnooze(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.checkout("evt_undo", "enq-undo", "")
	a := d.waitAction("open_opportunity", "enq-undo", ledger.StateFailed)
	path := fmt.Sprintf("/actions/%d?client=%s", a.ID, url.QueryEscape(a.Client))

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open(path, "#assign")
	b.do("pick the operator", chromedp.SetValue(chromedp.ID("assign-owner"), opsEmail))
	b.submit("#assign")
	if got := d.state(a.ID); got.Owner != opsEmail {
		t.Fatalf("after Assign the owner is %q", got.Owner)
	}
	b.screenshot("undo-assign")
	b.submit("#undo")
	if msg := b.text(".flash"); msg != "Undone." {
		t.Errorf("after Undo: %q", msg)
	}
	if got := d.state(a.ID); got.Owner != a.Owner {
		t.Errorf("after Undo the owner is %q, want %q back", got.Owner, a.Owner)
	}
	if b.has("#undo") {
		t.Errorf("an undo offers to undo itself")
	}

	// A snooze, undone: no snooze is left.
	b.do("snooze a week", chromedp.Click(chromedp.CSS(`input[name=snooze][value="week"]`)))
	b.submit("#snooze-button")
	b.submit("#undo")
	var left int
	if err := d.pool.QueryRow(t.Context(), `SELECT count(*) FROM snoozes WHERE action_id = $1`, a.ID).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d snoozes after the undo (%v), want none", left, err)
	}
	var acts []string
	rows, err := d.pool.Query(t.Context(), `SELECT act FROM audit WHERE action_id = $1 ORDER BY id`, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var s string
		_ = rows.Scan(&s)
		acts = append(acts, s)
	}
	if strings.Join(acts, " ") != "assign undo snooze undo" {
		t.Errorf("the audit trail holds %v", acts)
	}

	// The Undo goes after a few seconds.
	b.submit("#snooze-button")
	b.do("see Undo go", chromedp.WaitVisible(chromedp.ID("undo")), chromedp.WaitNotPresent(chromedp.ID("undo")))

	// Too late on the server's clock, or someone else's: refused, in words.
	d.clock.Advance(time.Minute)
	p := d.person()
	p.login(adminEmail)
	if r := p.post(path, fmt.Sprintf("/actions/%d/undo?client=%s", a.ID, url.QueryEscape(a.Client)), nil); r.status != http.StatusConflict ||
		!strings.Contains(r.body, "an undo is offered for 30s only") {
		t.Errorf("a late undo: %d %s", r.status, tailOf(r.body, 300))
	}
	ops := d.person()
	ops.login(opsEmail)
	if r := ops.post(path, fmt.Sprintf("/actions/%d/undo", a.ID), nil); r.status != http.StatusConflict || !strings.Contains(r.body, "only they can undo it") {
		t.Errorf("an undo of another's snooze: %d %s", r.status, tailOf(r.body, 300))
	}

	// A retry reaches the CRM: no Undo, and the message says so.
	b.open(path, "#retry")
	b.submit("#retry")
	b.submit("#confirm-retry")
	if msg := b.text(".flash"); !strings.Contains(msg, "It cannot be undone: it goes to crm.") {
		t.Errorf("after Retry: %q", msg)
	}
	if b.has("#undo") {
		t.Errorf("a retry offers Undo")
	}
	d.waitAction("open_opportunity", "enq-undo", ledger.StateConfirmed)
	if n := d.crm.CountByRef(a.OperationKey); n != 1 {
		t.Errorf("the CRM holds %d records, want 1", n)
	}
}
