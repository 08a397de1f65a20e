package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestBrowserSnoozeComesBackOnTime: an operator snoozes a failed action of
// theirs for an hour in Chromium. It leaves their Mine and the queue's default
// view, stays in the queue's counts, shows under the "only the snoozed"
// filter, and neither its state nor the destination's records change; an hour
// later on the test's clock it is back in Mine and in the queue by itself.
func TestBrowserSnoozeComesBackOnTime(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.checkout("evt_snooze", "enq-snooze", "")
	a := d.waitAction("open_opportunity", "enq-snooze", ledger.StateFailed)
	if _, err := d.review.Do(t.Context(), ledger.Actor{Name: adminEmail, Role: settings.RoleAdmin}, review.ActAssign, a.ID,
		review.ActParams{Owner: opsEmail}); err != nil {
		t.Fatal(err)
	}
	link := fmt.Sprintf(`#queue-table a[href^="/actions/%d?"]`, a.ID)
	listed := func(b *browser, path string) bool {
		b.open(path, "main h1")
		return eval[bool](b, `document.querySelector('`+link+`') !== null`)
	}

	b := newBrowser(t, d.url)
	b.login(opsEmail, password)
	if !listed(b, "/mine") {
		t.Fatal("the assigned action is not in the operator's Mine")
	}
	b.open(fmt.Sprintf("/actions/%d", a.ID), "#snooze-button")
	b.do("snooze for an hour", chromedp.Click(chromedp.CSS(`input[name=snooze][value="1h"]`)))
	b.submit("#snooze-button")
	if msg := b.text(".flash"); !strings.HasPrefix(msg, "Snoozed until ") {
		t.Errorf("after snoozing: %q", msg)
	}
	b.do("see it snoozed", chromedp.WaitVisible(chromedp.ID("snoozed")))
	b.screenshot("action-snoozed")
	if got := d.state(a.ID); got.State != ledger.StateFailed || got.Reason != a.Reason || got.Owner != opsEmail {
		t.Errorf("the snooze changed the action: %+v", got)
	}
	var until time.Time
	if err := d.pool.QueryRow(t.Context(), `SELECT until FROM snoozes WHERE action_id = $1`, a.ID).Scan(&until); err != nil ||
		until.Sub(d.clock.Now()) < 59*time.Minute || until.Sub(d.clock.Now()) > time.Hour {
		t.Fatalf("the snooze ends at %v (%v), want an hour from now", until, err)
	}
	var audited int
	if err := d.pool.QueryRow(t.Context(), `SELECT count(*) FROM audit WHERE action_id = $1 AND act = 'snooze' AND actor = $2`,
		a.ID, opsEmail).Scan(&audited); err != nil || audited != 1 {
		t.Errorf("%d audit lines of the snooze (%v), want 1", audited, err)
	}
	if listed(b, "/mine") || listed(b, "/queue/failed") {
		t.Errorf("the snoozed action is still in Mine or the queue's default view")
	}
	if n := b.text("#count-state-failed"); !strings.Contains(n, "1") {
		t.Errorf("the failed count reads %q: a snooze must not take it out of the counts", n)
	}
	if !listed(b, "/queue/failed?snoozed=only") {
		t.Errorf("the snoozed filter does not list it")
	}
	if s := b.text(fmt.Sprintf(`#queue-table tr:has(a[href^="/actions/%d?"]) .row-snooze`, a.ID)); !strings.Contains(s, opsEmail) {
		t.Errorf("the snoozed row says %q", s)
	}

	// An hour on, it is back by itself: nobody woke it.
	d.clock.Advance(time.Hour + time.Minute)
	if !listed(b, "/mine") || !listed(b, "/queue/failed") {
		t.Errorf("an hour later the action is not back in Mine and the queue")
	}
	if n := len(d.crm.Records()); n != 0 {
		t.Errorf("the CRM holds %d records: a snooze must not perform anything", n)
	}
}
