package web_test

import (
	"fmt"
	"testing"

	"github.com/oncehook/oncehook/internal/ledger"
)

// actControls counts what a person could act with on a page: forms that post
// (sign-out is in the header, not in main), rows to tick, and the bulk tools.
const actControls = `document.querySelectorAll('main form[method=post], main input[name=id], #bulk-tool').length`

// TestBrowserViewerSeesNoActs opens, in Chromium, an action of acme with a
// correction waiting, the failed queue and an event as a viewer of acme: the
// pages show the action, the rows and the event, and nothing to act with. The
// control: an operator of acme is offered acts on the same pages.
func TestBrowserViewerSeesNoActs(t *testing.T) {
	t.Parallel()
	s := newScopeSite(t)
	failed := s.data["acme"].actions[ledger.StateFailed]
	pages := []struct{ path, shows string }{
		{fmt.Sprintf("/actions/%d", failed), "#correction"},
		{"/queue/failed", "table"},
		{fmt.Sprintf("/events/%d", s.data["acme"].events[0]), "main h1"},
	}
	for _, who := range []struct {
		email  string
		mayAct bool
	}{{"viewer-acme@example.com", false}, {"op-acme@example.com", true}} {
		b := newBrowser(t, s.url)
		b.login(who.email, password)
		for _, pg := range pages {
			b.open(pg.path, pg.shows)
			n := eval[int](b, actControls)
			switch {
			case !who.mayAct && n != 0:
				t.Errorf("%s as %s: %d controls to act with, want none", pg.path, who.email, n)
			case who.mayAct && n == 0:
				t.Errorf("%s as %s: nothing to act with", pg.path, who.email)
			}
		}
		if !who.mayAct {
			b.open(fmt.Sprintf("/actions/%d", failed), "#correction")
			b.screenshot("viewer-action")
		}
	}
}
