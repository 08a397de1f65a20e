package web_test

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestBrowserPagesUpdateThemselves: the action page and the overview follow the
// worker without a reload, say how fresh they are, and can be paused.
func TestBrowserPagesUpdateThemselves(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.checkout("evt_live", "enq-live", "")
	a := d.waitAction("open_opportunity", "enq-live", ledger.StateFailed)

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open(fmt.Sprintf("/actions/%d", a.ID), "#live")
	_ = eval[bool](b, `window.notReloaded = true`)
	waitUntil(t, "the freshness line", func() bool {
		return regexp.MustCompile(`^updated \d+ s ago$`).MatchString(b.text("#live-age"))
	})
	// Someone else retries it (the API, another person); the worker confirms it.
	if _, err := d.review.Do(t.Context(), ledger.Actor{Name: "token:ci", Role: settings.RoleAdmin}, review.ActRetry, a.ID,
		review.ActParams{}); err != nil {
		t.Fatal(err)
	}
	d.waitAction("open_opportunity", "enq-live", ledger.StateConfirmed)
	waitUntil(t, "the page to show confirmed", func() bool { return b.text("hgroup .state") == ledger.StateConfirmed })
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Errorf("the page reloaded to show the change")
	}
	if n := d.crm.CountByRef(a.OperationKey); n != 1 {
		t.Errorf("the CRM holds %d records for the key, want 1", n)
	}

	// The overview's failed count follows too; Pause stops it.
	d.crm.Fail(sandbox.Fault{Status: 422})
	b.open("/", "#count-failed")
	_ = eval[bool](b, `window.notReloaded = true`)
	if got := b.text("#count-failed"); got != "0" {
		t.Fatalf("failed count = %q, want 0", got)
	}
	d.checkout("evt_live_2", "enq-live-2", "")
	d.waitAction("open_opportunity", "enq-live-2", ledger.StateFailed)
	waitUntil(t, "the failed count to reach 1", func() bool { return b.text("#count-failed") == "1" })
	if !eval[bool](b, `window.notReloaded === true`) {
		t.Errorf("the overview reloaded to show the change")
	}
	b.do("pause", chromedp.Click(chromedp.ID("live-pause")))
	if got := b.text("#live-age"); !strings.HasPrefix(got, "updates paused") {
		t.Errorf("paused, the status reads %q", got)
	}
	if got := b.text("#live-pause"); !strings.Contains(got, "Resume") {
		t.Errorf("the pause button reads %q", got)
	}
}
