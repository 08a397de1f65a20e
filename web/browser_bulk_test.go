package web_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserBulkActsOnWhatIsShown: after a search typed into the queue's search
// box narrows the table, "all that match" touches exactly the rows shown, says how
// many first and does nothing until confirmed; the report is a page of its own.
func TestBrowserBulkActsOnWhatIsShown(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	keys := []string{"enq-two-a", "enq-two-b", "enq-one-c", "enq-one-d"}
	ids := map[string]int64{}
	for i, k := range keys {
		d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
		d.checkout(fmt.Sprintf("evt_bulk_%d", i), k, "")
		ids[k] = d.waitAction("open_opportunity", k, ledger.StateFailed).ID
	}
	owners := func() map[string]string {
		out := map[string]string{}
		for k, id := range ids {
			got, err := d.review.GetAction(t.Context(), id)
			if err != nil {
				t.Fatal(err)
			}
			out[k] = got.Action.Owner
		}
		return out
	}
	before := owners()

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/queue/failed", "#queue-table")
	b.unfold()
	rows := func() int { return eval[int](b, `document.querySelectorAll('#queue-table tbody tr').length`) }
	if n := rows(); n != 4 {
		t.Fatalf("the failed queue shows %d rows, want 4", n)
	}
	// The bulk bar comes before the rows: reachable without tabbing through them.
	if !eval[bool](b, `!!(document.getElementById('bulk').compareDocumentPosition(document.getElementById('queue-table')) & Node.DOCUMENT_POSITION_FOLLOWING)`) {
		t.Errorf("the bulk form comes after the table")
	}
	// Select all, then a shift-click range.
	b.do("select all", chromedp.Click(chromedp.ID("pick-all")))
	if got := b.text("#bulk-count"); got != "4 actions selected." {
		t.Errorf("after select-all the bar says %q", got)
	}
	b.do("clear", chromedp.Click(chromedp.ID("pick-all")))
	b.do("pick the first", chromedp.Click(chromedp.CSS(`#queue-table tbody tr:nth-child(1) input[name=id]`)))
	b.shiftClick(`#queue-table tbody tr:nth-child(3) input[name=id]`)
	if got := b.text("#bulk-count"); got != "3 actions selected." {
		t.Errorf("after a shift-click from row 1 to row 3 the bar says %q; checked: %s", got,
			eval[string](b, `[...document.querySelectorAll('#queue-table input[name=id]')].map(x => x.checked).join(',')`))
	}
	b.do("clear", chromedp.Click(chromedp.ID("pick-all")), chromedp.Click(chromedp.ID("pick-all")))

	// Typing narrows the table by itself; the bulk form follows it.
	b.do("type a search", chromedp.SendKeys(chromedp.ID("f-q"), "enq-two"))
	waitUntil(t, "the search to narrow the table", func() bool {
		return rows() == 2 && strings.Contains(b.location(), "q=enq-two")
	})
	if q := eval[string](b, `document.querySelector('input[form=bulk][name=q]').value`); q != "enq-two" {
		t.Fatalf("the bulk form carries search %q, want the one typed", q)
	}
	b.do("all that match, to the operator", chromedp.Click(chromedp.ID("bulk-all")),
		chromedp.SetValue(chromedp.ID("bulk-owner"), opsEmail))
	b.submit("#bulk-assign")
	if loc := b.location(); !strings.HasPrefix(loc, "/queue/failed/bulk?") {
		t.Fatalf("Assign on all that match went to %s, want the confirmation step", loc)
	}
	if got := b.text("#bulk-confirm-count"); !strings.Contains(got, "assign 2 actions") {
		t.Errorf("the confirmation says %q, want the count of 2", got)
	}
	list := b.text("#bulk-confirm-list")
	for _, k := range keys {
		if shown := strings.HasPrefix(k, "enq-two"); strings.Contains(list, k) != shown {
			t.Errorf("the confirmation lists %s: %v, want %v:\n%s", k, !shown, shown, list)
		}
	}
	if got := owners(); fmt.Sprint(got) != fmt.Sprint(before) {
		t.Fatalf("before confirming, owners changed: %v, were %v", got, before)
	}
	b.screenshot("bulk-confirm")

	b.submit("#bulk-confirm")
	if loc := b.location(); loc != "/queue/failed/bulk/done" {
		t.Fatalf("after confirming: %s, want the report's own page", loc)
	}
	if got := b.text("#bulk-summary"); got != "assign: 2 done, 0 refused" {
		t.Errorf("report heading = %q", got)
	}
	done := b.text("#bulk-done")
	for k, owner := range owners() {
		want := before[k]
		if strings.HasPrefix(k, "enq-two") {
			want = opsEmail
			if !strings.Contains(done, k) {
				t.Errorf("the report does not name %s:\n%s", k, done)
			}
		}
		if owner != want {
			t.Errorf("%s is owned by %s, want %s", k, owner, want)
		}
	}
	b.screenshot("bulk-report")
	// The report was reached by a redirect: reloading it sends nothing again.
	b.do("reload the report", chromedp.Reload(), chromedp.WaitVisible(chromedp.ID("bulk-summary")))
	if n := b.dialogs.Load(); n != 0 {
		t.Errorf("%d JavaScript dialogs opened", n)
	}
	if v := b.cspViolations(); len(v) > 0 {
		t.Errorf("Content-Security-Policy violations:\n%s", strings.Join(v, "\n"))
	}
}

// shiftClick clicks the element sel with the Shift key held, as a person
// selecting a range does.
func (b *browser) shiftClick(sel string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, step)
	defer cancel()
	for {
		// The table may be swapped for a fresh one between finding the node and
		// clicking it (see text): then the click starts again with the new node.
		nodes, err := chromedp.Run(ctx, chromedp.Nodes(chromedp.CSS(sel)))
		if err != nil || len(nodes) == 0 {
			b.t.Fatalf("find %s: %v", sel, err)
		}
		err = chromedp.Do(ctx, chromedp.MouseClickNode(nodes[0], chromedp.ButtonModifiers(chromedp.ModifierShift)))
		if err == nil {
			return
		}
		if !nodeReplaced(err) || ctx.Err() != nil {
			b.t.Fatalf("shift-click %s: %v", sel, err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}
