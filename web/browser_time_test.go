package web_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestBrowserTimesInReadersZone: in a browser set to Asia/Kolkata (UTC+5:30),
// times read in Kolkata's time with the exact UTC time on hover, and relative ages
// move on while the page stays open.
func TestBrowserTimesInReadersZone(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	d.crm.Fail(sandbox.Fault{Status: 422})
	d.checkout("evt_tz", "enq-tz", "")
	a := d.waitAction("open_opportunity", "enq-tz", ledger.StateFailed)
	if _, err := d.pool.Exec(t.Context(), `UPDATE actions SET state_since = now() - interval '40 seconds' WHERE id = $1`, a.ID); err != nil {
		t.Fatal(err)
	}

	b := newBrowser(t, d.url)
	if _, err := chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Kolkata"}); err != nil {
		t.Fatal(err)
	}
	b.login(adminEmail, password)
	b.open(fmt.Sprintf("/actions/%d", a.ID), "#state-since time")
	iso := eval[string](b, `document.querySelector('#state-since time').dateTime`)
	at, err := time.Parse(time.RFC3339, iso)
	if err != nil {
		t.Fatalf("datetime %q: %v", iso, err)
	}
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	shown := b.text("#state-since time")
	if want := at.In(kolkata).Format("15:04:05"); !strings.Contains(shown, want) || !strings.Contains(shown, "GMT+5:30") {
		t.Errorf("in Kolkata the time reads %q, want %s GMT+5:30", shown, want)
	}
	if title := eval[string](b, `document.querySelector('#state-since time').title`); title != at.UTC().Format("2006-01-02 15:04:05 UTC") {
		t.Errorf("the hover shows %q, want the exact UTC time", title)
	}

	// The events list, the sources and the users read in the reader's time too.
	for _, page := range []struct{ path, sel string }{
		{"/events", "#events time[data-local]"}, {"/sources", "main time[data-local]"}, {"/users", "main time[data-local]"},
	} {
		b.open(page.path, page.sel)
		if shown := b.text(page.sel); !strings.Contains(shown, "GMT+5:30") {
			t.Errorf("%s shows a time as %q, want Kolkata's time (GMT+5:30)", page.path, shown)
		}
	}

	// The age in the queue moves on by itself: 40s becomes a minute without a reload.
	b.open("/queue/failed", "#queue-table time[data-age]")
	cell := fmt.Sprintf(`#queue-table tr:has(a[href^="/actions/%d?"]) td.age time[data-age]`, a.ID)
	first := b.text(cell)
	if !strings.HasSuffix(first, "s") {
		t.Fatalf("the age starts at %q, want seconds", first)
	}
	waitUntil(t, "the age to reach a minute", func() bool { return b.text(cell) == "1m" })
}
