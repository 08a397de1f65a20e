package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserTrends: per queue and per destination, the last hour's new actions
// and failed calls as small server-drawn charts with their figures in words.
func TestBrowserTrends(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	for i := range 2 {
		d.crm.Fail(sandbox.Fault{Status: 422})
		d.checkout(fmt.Sprintf("evt_trend_%d", i), fmt.Sprintf("enq-trend-%d", i), "")
		d.waitAction("open_opportunity", fmt.Sprintf("enq-trend-%d", i), ledger.StateFailed)
		d.waitAction("send_welcome_email", fmt.Sprintf("enq-trend-%d", i), ledger.StateConfirmed)
	}
	b := newBrowser(t, d.url)
	b.login(adminEmail, password)
	b.open("/trends?window=hour", "#trend-dest-crm svg")
	for sel, want := range map[string]string{
		"#trend-dest-crm .chart-summary small":     "2 new actions, 2 failed calls over the last hour",
		"#trend-dest-mail .chart-summary small":    "2 new actions, 0 failed calls over the last hour",
		"#trend-queue-failed .chart-summary small": "2 arrived over the last hour",
	} {
		if got := b.text(sel); got != want {
			t.Errorf("%s reads %q, want %q", sel, got, want)
		}
	}
	// The bars are there, in the newest bucket, each with its figure on hover.
	bars := eval[[]string](b, `[...document.querySelectorAll('#trend-dest-crm rect.bar-failed title')].map(x => x.textContent)`)
	if len(bars) != 1 || !strings.HasSuffix(bars[0], ": 2") {
		t.Errorf("crm's failed bars: %v, want one bar of 2", bars)
	}
	if n := eval[int](b, `document.querySelectorAll('#trend-dest-mail rect.bar-failed').length`); n != 0 {
		t.Errorf("mail shows %d failed bars", n)
	}
	if !strings.Contains(b.text("#trend-dest-crm header"), "getting worse") {
		t.Errorf("crm's failures all came in the two newest buckets but it is not marked as getting worse")
	}
	for _, w := range []string{"day", "week"} {
		b.open("/trends?window="+w, "#trend-dest-crm svg")
		if got := b.text("#trend-dest-crm .chart-summary small"); got != "2 new actions, 2 failed calls over the last "+w {
			t.Errorf("%s: crm reads %q", w, got)
		}
	}
	b.screenshot("trends")
}
