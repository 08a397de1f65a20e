package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserEveryWidth: at 390 px (a phone) no page is wider than the screen, the
// navigation folds behind a Menu button, and wide tables scroll inside their box;
// at 1280 px the navigation is open. Screenshots of both widths are saved.
func TestBrowserEveryWidth(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved by a manager before the opportunity opens"})
	evID := d.checkout("evt_width", "enq-width-with-a-rather-long-business-key-0123456789", "a long note that goes on")
	a := d.waitAction("open_opportunity", "enq-width-with-a-rather-long-business-key-0123456789", ledger.StateFailed)
	pages := []string{"/", "/queue/failed", "/queue/outstanding", "/mine", fmt.Sprintf("/actions/%d", a.ID),
		fmt.Sprintf("/actions/%d/retry", a.ID), "/events/" + evID, "/sources", "/destinations", "/users",
		"/queue/failed/bulk?act=retry", "/no/such/page", "/actions", "/trends", "/queue/failed?sort=state_since"}

	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	wide := func() int {
		return eval[int](b, `document.documentElement.scrollWidth - document.documentElement.clientWidth`)
	}
	b.do("phone width", chromedp.EmulateViewport(390, 844))
	for _, p := range pages {
		b.open(p, "main")
		if over := wide(); over > 0 {
			culprit := eval[string](b, `[...document.querySelectorAll('body *')].filter(e => e.getBoundingClientRect().right > innerWidth + 1 && !(e.parentElement && e.parentElement.closest('.table-wrap'))).slice(0, 3).map(e => e.tagName + '.' + e.className + '#' + e.id).join(', ')`)
			t.Errorf("%s is %d px wider than a 390 px screen (%s)", p, over, culprit)
		}
		if eval[bool](b, `getComputedStyle(document.querySelector('.nav-links')).display !== 'none'`) {
			t.Errorf("%s: at 390 px the navigation links show before Menu is pressed", p)
		}
		name := strings.NewReplacer("/", "-", "?", "-", "=", "-").Replace(strings.Trim(p, "/"))
		if p == "/" || p == "/queue/failed" || strings.HasPrefix(p, "/actions/") && !strings.HasSuffix(p, "retry") {
			if name == "" {
				name = "overview"
			}
			b.screenshot("390-" + name)
		}
	}
	// Menu opens the navigation.
	b.open("/", "main")
	b.do("open the menu", chromedp.Click(chromedp.CSS(`label[for=nav-toggle]`)))
	if !eval[bool](b, `getComputedStyle(document.querySelector('.nav-links')).display !== 'none' && document.querySelector('.nav-links a[href="/queue/failed"]').getBoundingClientRect().width > 0`) {
		t.Errorf("Menu does not show the navigation")
	}
	b.do("desktop width", chromedp.EmulateViewport(1280, 900))
	shots := map[string]string{"/": "overview", "/queue/failed": "queue-failed", fmt.Sprintf("/actions/%d", a.ID): "action",
		"/actions": "actions", "/trends": "trends"}
	for _, p := range pages {
		b.open(p, "main")
		if name, ok := shots[p]; ok {
			b.screenshot("1280-" + name)
		}
		if over := wide(); over > 0 {
			t.Errorf("%s is %d px wider than a 1280 px screen", p, over)
		}
		if !eval[bool](b, `getComputedStyle(document.querySelector('.nav-links')).display !== 'none'`) {
			t.Errorf("%s: at 1280 px the navigation is folded", p)
		}
		if eval[bool](b, `getComputedStyle(document.querySelector('.nav-toggle-label')).display !== 'none'`) {
			t.Errorf("%s: at 1280 px the Menu button shows", p)
		}
		if h := eval[int](b, `Math.round(document.querySelector('body > header').getBoundingClientRect().height)`); h > 130 {
			t.Errorf("%s: at 1280 px the header is %d px tall: the navigation does not sit in a line or two", p, h)
		}
	}
}
