package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserOldestWaitingSurvivesAssign: the overview's "oldest waiting" and a
// row's age count from when the action entered its state, so assigning it does
// not make it look new.
func TestBrowserOldestWaitingSurvivesAssign(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
	d.checkout("evt_age", "enq-age", "")
	a := d.waitAction("open_opportunity", "enq-age", ledger.StateFailed)
	// It failed three hours ago, as far as the ledger knows.
	if _, err := d.pool.Exec(t.Context(), `UPDATE actions SET state_since = now() - interval '3 hours 10 seconds',
		updated_at = now() - interval '3 hours' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/", "#oldest-failed")
	if got := b.text("#oldest-failed"); got != "oldest waiting 3h 0m" {
		t.Fatalf("before Assign the overview says %q, want 3h 0m", got)
	}
	b.open(fmt.Sprintf("/actions/%d", a.ID), "#assign")
	b.do("pick the operator", chromedp.SetValue(chromedp.ID("assign-owner"), opsEmail))
	b.submit("#assign")
	if owner := b.text("#owner"); owner != opsEmail {
		t.Fatalf("owner after Assign = %q", owner)
	}
	b.open("/", "#oldest-failed")
	if got := b.text("#oldest-failed"); got != "oldest waiting 3h 0m" {
		t.Errorf("after Assign the overview says %q, want 3h 0m still", got)
	}
	b.open("/queue/failed", "#queue-table")
	row := b.text(fmt.Sprintf(`#queue-table tr:has(a[href^="/actions/%d?"])`, a.ID))
	if !strings.Contains(row, "3h 0m") {
		t.Errorf("the queue row's age after Assign: %q, want 3h 0m", row)
	}
}
