package web_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserSortColumns: a queue sorts by its Created and Age headings, each a
// link that turns the order round on a second click and says which order it is
// in; the pages of a sorted list follow one another in that order.
func TestBrowserSortColumns(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	keys := []string{"enq-sort-a", "enq-sort-b", "enq-sort-c"}
	for i, k := range keys {
		d.crm.Fail(sandbox.Fault{Status: 422})
		d.checkout(fmt.Sprintf("evt_sort_%d", i), k, "")
		d.waitAction("open_opportunity", k, ledger.StateFailed)
	}
	// Waiting times that are not in the order of creation: b waits longest, then c, then a.
	for k, ago := range map[string]time.Duration{"enq-sort-a": time.Hour, "enq-sort-b": 3 * time.Hour, "enq-sort-c": 2 * time.Hour} {
		if _, err := d.pool.Exec(context.Background(), `UPDATE actions SET state_since = now() - $2::interval
			WHERE business_key = $1 AND name = 'open_opportunity'`, k, ago.String()); err != nil {
			t.Fatal(err)
		}
	}
	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	order := func() []string {
		return eval[[]string](b, `[...document.querySelectorAll('#queue-table tbody td.mono')].map(x => x.textContent)`)
	}
	sorted := func() string {
		return eval[string](b, `[...document.querySelectorAll('#queue-table th[aria-sort]')].map(x => x.textContent.trim() + ' ' + x.getAttribute('aria-sort')).join()`)
	}
	b.open("/queue/failed", "#queue-table tbody")
	for _, step := range []struct {
		click  string // a heading's link, "" for the page as it opens
		want   []string
		sorted string
		query  string
	}{
		{"", []string{"enq-sort-c", "enq-sort-b", "enq-sort-a"}, "Created ▼ descending", ""},
		{"Age", []string{"enq-sort-b", "enq-sort-c", "enq-sort-a"}, "Age ▼ descending", "sort=state_since"},
		{"Age", []string{"enq-sort-a", "enq-sort-c", "enq-sort-b"}, "Age ▲ ascending", "sort=-state_since"},
		{"Created", []string{"enq-sort-c", "enq-sort-b", "enq-sort-a"}, "Created ▼ descending", ""},
		{"Created", []string{"enq-sort-a", "enq-sort-b", "enq-sort-c"}, "Created ▲ ascending", "sort=created"},
	} {
		if step.click != "" {
			b.submit(fmt.Sprintf(`#queue-table th a.sort-link[aria-label^="%s,"]`, step.click))
		}
		if got := order(); !slices.Equal(got, step.want) {
			t.Errorf("after %q: rows %v, want %v", step.click, got, step.want)
		}
		if got := sorted(); got != step.sorted {
			t.Errorf("after %q: the sorted heading reads %q, want %q", step.click, got, step.sorted)
		}
		if loc := b.location(); !strings.Contains(loc, step.query) || (step.query == "" && strings.Contains(loc, "sort=")) {
			t.Errorf("after %q: at %s, want %q in the address", step.click, loc, step.query)
		}
	}
	// The all-actions page lists closed actions too: no heading sorts it by waiting.
	b.open("/actions", "#queue-table tbody")
	if n := eval[int](b, `document.querySelectorAll('#queue-table th a.sort-link').length`); n != 1 {
		t.Errorf("/actions has %d sorting headings, want 1 (Created)", n)
	}
	// Page after page, one action a page, in the order of waiting.
	for sort, want := range map[string][]string{
		review.SortWaitingLongest: {"enq-sort-b", "enq-sort-c", "enq-sort-a"},
		review.SortWaitingLeast:   {"enq-sort-a", "enq-sort-c", "enq-sort-b"},
		review.SortOldest:         {"enq-sort-a", "enq-sort-b", "enq-sort-c"},
	} {
		f := review.ActionFilter{States: []string{ledger.StateFailed}, Name: "open_opportunity", Sort: sort, Limit: 1}
		var got []string
		for range 5 {
			page, err := d.review.ListActions(context.Background(), f)
			if err != nil {
				t.Fatal(err)
			}
			for _, a := range page.Actions {
				got = append(got, a.BusinessKey)
			}
			if f.Cursor = page.NextCursor; f.Cursor == "" {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s, page by page: %v, want %v", sort, got, want)
		}
	}
	// Orders that do not exist, or waiting among closed actions, are refused in words.
	for _, f := range []review.ActionFilter{{Sort: "name"}, {Sort: review.SortWaitingLongest, States: []string{ledger.StateConfirmed}}} {
		if _, err := d.review.ListActions(context.Background(), f); ledger.ErrorCode(err) != ledger.EINVALID {
			t.Errorf("sort %q over %v: %v, want EINVALID", f.Sort, f.States, err)
		}
	}
}
