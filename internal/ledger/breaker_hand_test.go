package ledger_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestBreakerByHand: an admin opens the CRM's breaker for a planned
// maintenance until a time: its actions are parked as in an outage and the CRM
// hears nothing, and at the until a probe goes first and closes it, releasing
// them; opened with no until it never probes, and the admin closes it early,
// releasing them. Operators and viewers are refused and nothing changes; bad
// requests say why; the transitions name who and why, and the outage is the
// admin's.
func TestBreakerByHand(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong", noEngine: true})
	w.startEngine(0)
	viewer := w.newToken("looker", settings.RoleViewer)
	path := "/destinations/crm/breaker"
	creates := func() int { return len(w.crm.Creates()) }
	deliver := func(from, n int) {
		for i := from; i < from+n; i++ {
			w.deliverCheckoutTo("stripe-live", checkout{eventID: fmt.Sprintf("evt_hand_%d", i),
				enquiry: fmt.Sprintf("hand-%d", i), amount: 100 + i})
		}
	}
	state := func() string {
		t.Helper()
		return apiBreaker(t, w, "crm")["state"].(string)
	}

	// Operators and viewers may not: a destination serves every client.
	for _, tok := range []string{w.token, viewer} {
		if status, out := w.api(tok, "POST", path, map[string]any{"state": "open", "reason": "maintenance"}); status != 403 {
			t.Fatalf("a non-admin opening the breaker: %d %v, want 403", status, out)
		}
	}
	if state() != ledger.BreakerClosed || w.count(`SELECT count(*) FROM breaker_transitions`) != 0 {
		t.Fatal("a refused request changed the breaker")
	}
	for _, c := range []struct {
		body   map[string]any
		status int
		says   string
	}{
		{map[string]any{"state": "open"}, 400, "needs a reason"},
		{map[string]any{"state": "ajar", "reason": "x"}, 400, `not "ajar"`},
		{map[string]any{"state": "open", "reason": "x", "until": time.Now().Add(-time.Hour)}, 400, "is past"},
		{map[string]any{"state": "closed", "reason": "x"}, 409, "closed already"},
	} {
		if status, out := w.api(w.admin, "POST", path, c.body); status != c.status || !strings.Contains(fmt.Sprint(out), c.says) {
			t.Errorf("%v: %d %v, want %d saying %q", c.body, status, out, c.status, c.says)
		}
	}
	if status, _ := w.api(w.admin, "POST", "/destinations/nowhere/breaker", map[string]any{"state": "open", "reason": "x"}); status != 404 {
		t.Errorf("an unknown destination: %d, want 404", status)
	}

	// A maintenance until a time: parked, the CRM untouched, then probed and closed.
	until := time.Now().Add(3 * time.Second).UTC().Truncate(time.Millisecond)
	status, out := w.api(w.admin, "POST", path, map[string]any{"state": "open", "reason": "CRM maintenance", "until": until})
	if status != 200 || out["state"] != "open" {
		t.Fatalf("an admin opening the breaker: %d %v", status, out)
	}
	deliver(0, 10)
	deadline := time.Now().Add(30 * time.Second)
	for w.count(`SELECT count(*) FROM actions WHERE name = 'open_opportunity' AND parked_at IS NOT NULL`) < 10 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 10 actions parked while the breaker is open by hand",
				w.count(`SELECT count(*) FROM actions WHERE name = 'open_opportunity' AND parked_at IS NOT NULL`))
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if n := creates(); n != 0 {
		t.Fatalf("the CRM received %d creates while its breaker was open by hand", n)
	}
	if time.Now().After(until) {
		t.Fatal("the test took past the until before checking the parking; its timing proves nothing")
	}
	waitAll(t, w, "open_opportunity", 10, ledger.StateConfirmed)
	if n := w.count(`SELECT count(*) FROM breaker_transitions WHERE to_state = 'half_open' AND at >= $1`, until); n < 1 {
		t.Errorf("no probe at the until: %d half-open transitions after it", n)
	}
	if n := w.count(`SELECT count(*) FROM breaker_transitions WHERE to_state = 'half_open' AND at < $1`, until); n != 0 {
		t.Errorf("%d probes before the until", n)
	}
	if state() != ledger.BreakerClosed {
		t.Fatalf("the breaker is %s after its until's probe found the CRM well", state())
	}

	// No until: no probe; closed early by hand, which releases what waits.
	if status, out := w.api(w.admin, "POST", path, map[string]any{"state": "open", "reason": "CRM migration"}); status != 200 {
		t.Fatalf("open with no until: %d %v", status, out)
	}
	if n := w.count(`SELECT count(*) FROM destinations WHERE name = 'crm' AND breaker_state = 'open' AND breaker_probe_at IS NULL`); n != 1 {
		t.Fatal("a breaker opened with no until has a probe time")
	}
	before := creates()
	deliver(10, 5)
	for w.count(`SELECT count(*) FROM actions WHERE name = 'open_opportunity' AND parked_at IS NOT NULL`) < 5 {
		if time.Now().After(deadline.Add(30 * time.Second)) {
			t.Fatal("the new actions were not parked")
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	status, out = w.api(w.admin, "POST", path, map[string]any{"state": "closed", "reason": "CRM back early"})
	if status != 200 || out["state"] != "closed" || out["released"] != float64(5) {
		t.Fatalf("an admin closing the breaker: %d %v, want 5 released", status, out)
	}
	if before != 10 {
		t.Fatalf("the CRM had %d creates before the second hold, want the first 10", before)
	}
	waitAll(t, w, "open_opportunity", 15, ledger.StateConfirmed)
	if n := creates(); n != 15 {
		t.Errorf("the CRM created %d records, want 15, one per action", n)
	}

	// The trail: who and why, and two outages opened by the admin.
	for _, want := range []string{"CRM maintenance; probes from", "CRM migration; no probe until closed by hand",
		"closed by hand: CRM back early; 5 parked actions released"} {
		if n := w.count(`SELECT count(*) FROM breaker_transitions WHERE actor = 'token:boss' AND reason LIKE $1`, "%"+want+"%"); n != 1 {
			t.Errorf("%d transitions by the admin say %q, want 1", n, want)
		}
	}
	// The second hold came within the quiet time of the first's close: the
	// same outage, opened again, as a flapping one.
	if n := w.count(`SELECT count(*) FROM outages WHERE opened_by = 'token:boss' AND reopened = 1 AND closed_at IS NOT NULL`); n != 1 {
		t.Errorf("%d outages opened by the admin, reopened once and over, want 1 (of %d)", n, w.count(`SELECT count(*) FROM outages`))
	}
}
