package web_test

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

// has reports whether sel finds a node on the browser's page.
func (b *browser) has(sel string) bool {
	b.t.Helper()
	return eval[bool](b, `document.querySelector(`+fmt.Sprintf("%q", sel)+`) !== null`)
}

// mainText is the text of the page's main landmark.
func (b *browser) mainText() string {
	b.t.Helper()
	return eval[string](b, `document.querySelector('main').innerText`)
}

// showsNextAttempt reports whether the action page has a "Next attempt" row.
func (b *browser) showsNextAttempt() bool {
	b.t.Helper()
	return eval[bool](b, `[...document.querySelectorAll('main th')].some(th => th.textContent.trim() === 'Next attempt')`)
}

func (d *dashboard) state(id int64) ledger.Action {
	d.t.Helper()
	got, err := d.review.GetAction(context.Background(), id)
	if err != nil {
		d.t.Fatal(err)
	}
	return got.Action
}

// TestBrowserBulkRetryOfTickedRowsAsksFirst: ticked rows go through the same
// confirmation as all that match: each action with its state, which ones the
// guard will refuse and why, no owner field on a Retry, and nothing done before
// the person confirms.
func TestBrowserBulkRetryOfTickedRowsAsksFirst(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_tick_1", "enq-tick-1", "")
	crmFailed := d.waitAction("open_opportunity", "enq-tick-1", ledger.StateFailed)
	mailFailed := d.waitAction("send_welcome_email", "enq-tick-1", ledger.StateFailed)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/queue/failed", "#queue-table")
	b.unfold()
	for _, id := range []int64{crmFailed.ID, mailFailed.ID} {
		b.do("tick a row", chromedp.Click(chromedp.CSS(fmt.Sprintf(`#queue-table input[name=id][value="%d"]`, id))))
	}
	b.submit("#bulk-retry")
	if loc := b.location(); !strings.HasPrefix(loc, "/queue/failed/bulk?") {
		t.Fatalf("Retry of ticked rows went to %s, want the confirmation step", loc)
	}
	for _, id := range []int64{crmFailed.ID, mailFailed.ID} {
		if got := d.state(id); got.State != ledger.StateFailed || got.Attempts != 1 {
			t.Fatalf("before confirming, action %d is %s after %d attempts", id, got.State, got.Attempts)
		}
	}
	if n := d.crm.Len(); n != 0 {
		t.Fatalf("before confirming, the CRM holds %d records", n)
	}
	row := func(id int64) string {
		return eval[string](b, fmt.Sprintf(`document.querySelector('#bulk-confirm-list input[value="%d"]').closest('li').innerText`, id))
	}
	if r := row(crmFailed.ID); !strings.Contains(r, "failed") || strings.Contains(r, "will be refused") {
		t.Errorf("the CRM action's line reads %q, want its state and no refusal", r)
	}
	if r := row(mailFailed.ID); !strings.Contains(r, "failed") || !strings.Contains(r, "will be refused") ||
		!strings.Contains(r, "could act twice") {
		t.Errorf("the email's line reads %q, want its state and why it will be refused", r)
	}
	if got := b.text("#bulk-confirm-count"); !strings.Contains(got, "retry 1 of 2 actions") || !strings.Contains(got, "1 will be refused") {
		t.Errorf("the confirmation says %q", got)
	}
	if body := b.mainText(); strings.Contains(body, "New owner") || b.has("#bulk-new-owner") {
		t.Errorf("a Retry's confirmation shows an owner:\n%s", body)
	}
	b.screenshot("bulk-confirm-ticked")

	b.submit("#bulk-confirm")
	if got := b.text("#bulk-summary"); got != "retry: 1 done, 1 refused" {
		t.Errorf("report heading = %q", got)
	}
	d.waitAction("open_opportunity", "enq-tick-1", ledger.StateConfirmed)
	if n := d.crm.CountByRef(crmFailed.OperationKey); n != 1 {
		t.Errorf("the CRM holds %d records for the retried action, want 1", n)
	}
	if got := d.state(mailFailed.ID); got.State != ledger.StateFailed {
		t.Errorf("the refused email is %s", got.State)
	}
}

// TestBrowserNextStepsTellTheTruth: the next step of an email waiting on a failed
// predecessor names it; the outstanding queue says who holds what; an uncertain
// action behind a disconnected destination shows no next attempt; and Reconcile
// there says it cannot run now and keeps the original reason.
func TestBrowserNextStepsTellTheTruth(t *testing.T) {
	t.Parallel()
	d := newDashboardConfig(t, dashAfterConfig)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.checkout("evt_blk_1", "enq-blk", "")
	pred := d.waitAction("open_opportunity", "enq-blk", ledger.StateFailed)
	email := d.waitAction("send_welcome_email", "enq-blk", ledger.StatePending)

	// One call hangs until the CRM has refused the next one's credentials, so its
	// unsure outcome lands behind a disconnected destination.
	hang, reached := make(chan struct{}), make(chan struct{})
	d.crm.Fail(sandbox.Fault{Status: 500, Hang: hang, Reached: reached})
	d.checkout("evt_unc_1", "enq-unc", "")
	select {
	case <-reached:
	case <-time.After(30 * time.Second):
		t.Fatal("the CRM never received the first call")
	}
	d.crm.Fail(sandbox.Fault{Status: 401, Message: "token revoked"})
	d.checkout("evt_held_1", "enq-held", "")
	d.waitAction("open_opportunity", "enq-held", ledger.StateHeld)
	close(hang)
	unsure := d.waitAction("open_opportunity", "enq-unc", ledger.StateUncertain)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open(fmt.Sprintf("/actions/%d", email.ID), "#next-step")
	step := b.text("#next-step")
	if !strings.Contains(step, "Blocked") || !strings.Contains(step, fmt.Sprintf("open_opportunity (action %d)", pred.ID)) ||
		!strings.Contains(step, "failed") || strings.Contains(step, "worker will perform") {
		t.Errorf("the email waiting on a failed predecessor says %q", step)
	}
	if b.showsNextAttempt() {
		t.Errorf("the blocked email shows a next attempt")
	}

	b.open("/queue/outstanding", "#queue-table")
	if h := b.text("main h1"); strings.Contains(h, "the workers have it") {
		t.Errorf("the outstanding heading says %q above a held action", h)
	}
	if body := b.mainText(); !strings.Contains(body, "1 held until an admin (or crm-admin@example.com) reconnects crm") {
		t.Errorf("the outstanding queue does not say who holds what:\n%s", body)
	}

	b.open(fmt.Sprintf("/actions/%d", unsure.ID), "#next-step")
	if step := b.text("#next-step"); !strings.Contains(step, "Nothing is scheduled") || !strings.Contains(step, "reconnects crm") {
		t.Errorf("the uncertain action behind a disconnected crm says %q", step)
	}
	if b.showsNextAttempt() {
		t.Errorf("the uncertain action behind a disconnected crm shows a next attempt")
	}
	original := unsure.Reason
	b.submit("#reconcile")
	// Reconcile asks first, and says before the click that it cannot run now.
	if w := b.text("#reconcile-waits"); !strings.Contains(w, "cannot run now") || !strings.Contains(w, "crm-admin@example.com") {
		t.Errorf("the Reconcile confirmation says %q", w)
	}
	if got := d.state(unsure.ID); got.Reason != original {
		t.Fatalf("before confirming, the reason changed to %q", got.Reason)
	}
	b.submit("#confirm-reconcile")
	if flash := b.text(".flash"); !strings.Contains(flash, "cannot run now") || !strings.Contains(flash, "reconnects crm") {
		t.Errorf("after Reconcile on a disconnected crm the page says %q", flash)
	}
	reason := b.text("#reason")
	// The page words the reason as a sentence, so its first letter is a capital.
	if !strings.Contains(strings.ToLower(reason), "reconcile requested by "+adminEmail) || !strings.Contains(reason, original) {
		t.Errorf("after Reconcile the reason reads %q; want the request beside the original %q", reason, original)
	}
	if got := d.state(unsure.ID); !strings.Contains(got.Reason, original) {
		t.Errorf("the stored reason lost the original: %q", got.Reason)
	}
	b.screenshot("action-reconcile-disconnected")
}

// TestBrowserCancelListsFollowOns: Cancel names the follow-on actions it cancels
// with it and asks; a form shown before the cascade changed cancels nothing.
func TestBrowserCancelListsFollowOns(t *testing.T) {
	t.Parallel()
	d := newDashboardConfig(t, dashAfterConfig)
	d.crm.Fail(sandbox.Fault{Status: 401, Message: "token revoked"})
	d.checkout("evt_cas_1", "enq-cas", "")
	held := d.waitAction("open_opportunity", "enq-cas", ledger.StateHeld)
	email := d.waitAction("send_welcome_email", "enq-cas", ledger.StatePending)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	path := fmt.Sprintf("/actions/%d", held.ID)
	b.open(path, "#cancel")
	cascade := b.text("#cancel-cascade")
	if !strings.Contains(cascade, "1 follow-on action") || !strings.Contains(cascade, "send_welcome_email") ||
		!strings.Contains(cascade, "enq-cas") {
		t.Errorf("the Cancel form says %q about follow-on actions", cascade)
	}
	if lbl := b.text(`label[for=cancel-confirm]`); !strings.Contains(lbl, "follow-on") {
		t.Errorf("the Cancel confirmation reads %q", lbl)
	}
	// A form that did not show the cascade cancels nothing.
	p := d.person()
	p.login(adminEmail)
	if r := p.post(path, path+"/cancel", url.Values{"confirm": {"1"}}); r.status != 409 {
		t.Errorf("cancel without the cascade shown: %d", r.status)
	}
	if got := d.state(held.ID); got.State != ledger.StateHeld {
		t.Fatalf("a cancel that did not show the cascade left it %s", got.State)
	}
	b.screenshot("action-cancel-cascade")
	b.do("confirm", chromedp.Click(chromedp.ID("cancel-confirm")))
	b.submit("#cancel")
	if got := d.state(held.ID); got.State != ledger.StateCancelled {
		t.Errorf("confirmed Cancel left it %s", got.State)
	}
	if got := d.state(email.ID); got.State != ledger.StateCancelled {
		t.Errorf("its follow-on email is %s", got.State)
	}
}

// TestBrowserCorrectionApprovedAndPerformed: a person corrects a rejected request
// from a form built from its params, naming the field the CRM's reason names; the
// same person cannot approve it; its owner approves, and only then does the CRM
// receive it, once, with the corrected amount, under a new attempt identity; the
// audit shows the original, the correction, who made and who approved it.
func TestBrowserCorrectionApprovedAndPerformed(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	const ownerEmail = "sales-ops@example.com" // the action rule's owner
	if _, err := accounts.CreateUser(context.Background(), d.pool, ownerEmail, settings.RoleOperator, password, d.cfg.Clients()...); err != nil {
		t.Fatal(err)
	}
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.checkout("evt_fix_1", "enq-fix", "")
	failed := d.waitAction("open_opportunity", "enq-fix", ledger.StateFailed)
	path := fmt.Sprintf("/actions/%d", failed.ID)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open(path, "#correct")
	if got := b.text("#named-field"); got != "amount" {
		t.Errorf("the named field is %q, want amount", got)
	}
	if got := b.text("#provider-reason"); !strings.Contains(got, "amount must be approved") {
		t.Errorf("the provider's reason reads %q", got)
	}
	b.do("correct the amount", chromedp.SetValue(chromedp.ID("p-amount"), "4000"),
		chromedp.SendKeys(chromedp.ID("correct-note"), "the approved amount"))
	b.submit("#propose-correction")
	if b.has("#approve-correction") {
		t.Errorf("the person who proposed the correction is offered to approve it")
	}
	if why := b.text("#approve-why-not"); !strings.Contains(why, "another person") {
		t.Errorf("the proposer is told %q", why)
	}
	p := d.person()
	p.login(adminEmail)
	if r := p.post(path, path+"/correction", url.Values{"decision": {"approve"}}); r.status != 403 {
		t.Errorf("self-approval: %d", r.status)
	}
	if got := d.state(failed.ID); got.State != ledger.StateFailed || d.crm.Len() != 0 {
		t.Fatalf("before approval the action is %s and the CRM holds %d records", got.State, d.crm.Len())
	}
	b.screenshot("action-correction-proposed")

	owner := newBrowser(t, d.url)
	owner.login(ownerEmail, password)
	owner.open(path, "#approve-correction")
	if diff := owner.text("#correction-diff"); !strings.Contains(diff, "4200") || !strings.Contains(diff, "4000") {
		t.Errorf("the correction shows:\n%s", diff)
	}
	owner.submit("#approve-correction")
	d.waitAction("open_opportunity", "enq-fix", ledger.StateConfirmed)

	done := d.state(failed.ID)
	if done.AttemptKey == "" || done.AttemptKey == done.OperationKey {
		t.Errorf("the corrected request's attempt identity is %q (operation key %q)", done.AttemptKey, done.OperationKey)
	}
	var recs []sandbox.Record
	for _, r := range d.crm.Records() {
		if r.Fields["enquiry_id"] == "enq-fix" {
			recs = append(recs, r)
		}
	}
	if len(recs) != 1 || fmt.Sprint(recs[0].Fields["amount"]) != "4000" || recs[0].IdempotencyKey != done.AttemptKey {
		t.Fatalf("the CRM holds %+v; want one record of amount 4000 under key %s", recs, done.AttemptKey)
	}
	owner.open(path, "#audit-h")
	audit := owner.text("section[aria-labelledby=audit-h] table")
	for _, want := range []string{adminEmail, "correct", ownerEmail, "approve-correction", "4200", "4000", "the approved amount"} {
		if !strings.Contains(audit, want) {
			t.Errorf("the audit does not show %q:\n%s", want, audit)
		}
	}
	if got := owner.text("#attempt-key"); got != done.AttemptKey {
		t.Errorf("the page shows attempt identity %q", got)
	}
	owner.screenshot("action-correction-performed")
}
