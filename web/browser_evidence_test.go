package web_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
)

// TestBrowserEvidenceToCheck: an email that needs a person shows its Message-ID
// and recipient; the conflict view marks what differs; the page's words never
// use the API's field names.
func TestBrowserEvidenceToCheck(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.mail.FailNext(550, "mailbox unavailable")
	d.checkout("evt_ev_1", "enq-ev", "first")
	mail := d.waitAction("send_welcome_email", "enq-ev", ledger.StateFailed)
	d.waitAction("open_opportunity", "enq-ev", ledger.StateConfirmed)

	b := newBrowser(t, d.url)
	b.login(opsEmail, password)
	b.open(fmt.Sprintf("/actions/%d", mail.ID), "#evidence")
	ev := b.text("#evidence")
	for _, want := range []string{"Message-ID", "@oncehook>", "Recipient", "ada@example.com"} {
		if !strings.Contains(ev, want) {
			t.Errorf("the evidence lacks %q:\n%s", want, ev)
		}
	}
	shownID := b.text("#evidence dd:nth-of-type(1) code")
	b.submit("#retry")
	b.do("confirm checking", chromedp.Click(chromedp.ID("checked")), chromedp.SendKeys(chromedp.ID("retry-note"), "not in the log"))
	b.submit("#confirm-retry")
	d.waitAction("send_welcome_email", "enq-ev", ledger.StateConfirmed)
	// The Message-ID shown is the one the mail server received the email with.
	var got []string
	for _, m := range d.mail.Messages() {
		got = append(got, m.MessageID)
	}
	if len(got) != 1 || got[0] != shownID {
		t.Errorf("the mail sink holds Message-IDs %v, the page showed %s", got, shownID)
	}
	b.open(fmt.Sprintf("/actions/%d", mail.ID), "#audit-h")
	body := eval[string](b, `document.querySelector('main').innerText`)
	if strings.Contains(body, "checked_destination") || strings.Contains(body, "operation_key") {
		t.Errorf("the page shows the API's field names:\n%s", body)
	}
	if !strings.Contains(body, "checked the destination: yes") {
		t.Errorf("the audit line does not say the destination was checked:\n%s", body)
	}
	if eval[bool](b, `document.getElementById('evidence') !== null`) {
		t.Errorf("a confirmed email still asks for a check by hand")
	}

	// Another event asks for the same opportunity with other parameters: a conflict.
	d.checkout("evt_ev_2", "enq-ev", "second")
	crm := d.waitAction("open_opportunity", "enq-ev", ledger.StateConfirmed)
	waitUntil(t, "the conflict to show", func() bool {
		b.open(fmt.Sprintf("/actions/%d", crm.ID), "#events-h")
		return eval[int](b, `document.querySelectorAll('table.diff').length`) > 0
	})
	differs := eval[[]string](b, `[...document.querySelectorAll('table.diff tbody tr')].filter(r => r.querySelector('td.differs')).map(r => r.querySelector('th').innerText)`)
	if len(differs) != 1 || !strings.HasPrefix(differs[0], "note") {
		t.Errorf("rows marked as differing: %v, want only note", differs)
	}
	same := eval[string](b, `getComputedStyle(document.querySelector('table.diff tbody tr td:not(.differs)')).backgroundColor`)
	diff := eval[string](b, `getComputedStyle(document.querySelector('table.diff td.differs')).backgroundColor`)
	if same == diff {
		t.Errorf("differing fields look like the others (%s)", diff)
	}
}
