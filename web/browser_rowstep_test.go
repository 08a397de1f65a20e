package web_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestBrowserRowStepIsItsCause: on the failed queue each row says its own short
// next step, the one the ledger computes for it (not the long paragraph, which
// stays on the action's page), beside a button for its act; the button opens
// the act's guard, and going through it acts on the destination once.
func TestBrowserRowStepIsItsCause(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	const ownerEmail = "sales-ops@example.com" // the action rule's owner
	if _, err := accounts.CreateUser(context.Background(), d.pool, ownerEmail, settings.RoleOperator, password, d.cfg.Clients()...); err != nil {
		t.Fatal(err)
	}
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_rows", "enq-rows", "")
	crm := d.waitAction("open_opportunity", "enq-rows", ledger.StateFailed)
	mail := d.waitAction("send_welcome_email", "enq-rows", ledger.StateFailed)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/queue/failed", fmt.Sprintf(`#queue-table a[href^="/actions/%d?"]`, crm.ID))
	row := func(id int64) string { return fmt.Sprintf(`#queue-table tr:has(a[href^="/actions/%d?"])`, id) }
	b.screenshot("queue-row-steps")
	for _, a := range []ledger.Action{crm, mail} {
		step, err := d.review.NextStep(t.Context(), a)
		if err != nil {
			t.Fatal(err)
		}
		got := b.text(row(a.ID) + " td.next")
		if !strings.HasPrefix(got, step.Short) || step.Short == "" || strings.Contains(got, "Nothing is scheduled") {
			t.Errorf("the row of %s says %q, want its short step %q", a.Name, got, step.Short)
		}
		if page := step.Text; page == step.Short {
			t.Errorf("the action's page and the row say the same %q", page)
		}
	}
	// Checked against the queue's own cause list: a row whose reason names no
	// field says its cause's fix; the CRM's says it with the field named.
	fixes := eval[[]string](b, `[...document.querySelectorAll('#queue-causes li')].map(li => li.querySelector('a').textContent.split(':')[0] + ' -> ' + li.querySelector('.fix').textContent)`)
	if !slices.Contains(fixes, "mail refused the request -> Correct it, then Retry") ||
		!slices.Contains(fixes, "crm refused the request -> Correct it, then Retry") {
		t.Fatalf("the cause list reads %q", fixes)
	}
	if got := b.text(row(mail.ID) + " td.next"); !strings.HasPrefix(got, "Correct it, then Retry.") {
		t.Errorf("the email's row says %q, want its cause's fix", got)
	}
	if got := b.text(row(crm.ID) + " td.next"); !strings.HasPrefix(got, "Correct amount, then Retry.") {
		t.Errorf("the CRM's row says %q, want the refused field named", got)
	}
	label := eval[string](b, `document.querySelector('`+row(crm.ID)+` td.next a.row-act').getAttribute('aria-label')`)
	if !strings.Contains(label, "Correct") || !strings.Contains(label, "enq-rows") {
		t.Errorf("the CRM's act is labelled %q for a screen reader", label)
	}

	// Its act opens the correction form on the action's page, the same guard as
	// there: the correction is proposed, and waits for another person.
	b.submit(row(crm.ID) + " td.next a.row-act")
	if loc := b.location(); !strings.HasPrefix(loc, fmt.Sprintf("/actions/%d?", crm.ID)) {
		t.Fatalf("the row's Correct opened %s", loc)
	}
	b.do("correct the amount", chromedp.WaitVisible(chromedp.ID("correct")),
		chromedp.SetValue(chromedp.ID("p-amount"), "4000"), chromedp.SendKeys(chromedp.ID("correct-note"), "approved amount"))
	b.submit("#propose-correction")
	if n := d.crm.Len(); n != 0 {
		t.Fatalf("the CRM holds %d records before the correction is approved", n)
	}

	// The owner's row now asks them to decide; its button opens the decision.
	owner := newBrowser(t, d.url)
	owner.login(ownerEmail, password)
	owner.open("/queue/failed", row(crm.ID))
	if got := owner.text(row(crm.ID) + " td.next"); !strings.HasPrefix(got, "Approve or refuse the correction "+adminEmail+" proposed.") {
		t.Errorf("the owner's row says %q", got)
	}
	owner.submit(row(crm.ID) + " td.next a.row-act")
	owner.do("see the correction", chromedp.WaitVisible(chromedp.ID("approve-correction")))
	owner.submit("#approve-correction")
	done := d.waitAction("open_opportunity", "enq-rows", ledger.StateConfirmed)
	var recs []sandbox.Record
	for _, r := range d.crm.Records() {
		if r.Fields["enquiry_id"] == "enq-rows" {
			recs = append(recs, r)
		}
	}
	if len(recs) != 1 || fmt.Sprint(recs[0].Fields["amount"]) != "4000" || recs[0].IdempotencyKey != done.AttemptKey {
		t.Fatalf("the CRM holds %+v; want one record of amount 4000", recs)
	}

	// A viewer reads the same step, with no button: viewers cannot act.
	const viewerEmail = "viewer@example.com"
	if _, err := accounts.CreateUser(context.Background(), d.pool, viewerEmail, settings.RoleViewer, password, d.cfg.Clients()...); err != nil {
		t.Fatal(err)
	}
	viewer := newBrowser(t, d.url)
	viewer.login(viewerEmail, password)
	viewer.open("/queue/failed", row(mail.ID))
	if got := viewer.text(row(mail.ID) + " td.next"); !strings.HasPrefix(got, "Correct") {
		t.Errorf("the viewer's row says %q", got)
	}
	if n := eval[int](viewer, `document.querySelectorAll('#queue-table a.row-act').length`); n != 0 {
		t.Errorf("a viewer's queue offers %d acts", n)
	}
}
