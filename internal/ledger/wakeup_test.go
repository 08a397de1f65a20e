package ledger_test

import (
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/engine"
)

// With polling an hour apart, only notifications move work along: a delivery the
// inbox stores wakes the router, and the actions the router creates wake the
// performer, each after the commit that made the work. The CRM then holds the one
// opportunity, well before any poll.
func TestNotificationsMoveWorkAlong(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	w.startEngineWith(func(p *engine.Params) { p.Poll = time.Hour })
	// The engine's first route and perform find nothing; wait until its listener
	// listens, so that the delivery's notification cannot come before it.
	deadline := time.Now().Add(20 * time.Second)
	for w.count(`SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND query = 'LISTEN oncehook_actions'`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the engine never listened for notifications")
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	w.deliver(checkout{eventID: "evt_wake", enquiry: "enq_wake", amount: 700})
	opp := w.waitFor("open_opportunity", "enq_wake", "confirmed")
	if got := w.crm.CountByRef(opp.OperationKey); got != 1 {
		t.Errorf("the CRM holds %d opportunities for %s, want 1", got, opp.OperationKey)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = 'evt_wake' AND status = 'routed'`); n != 1 {
		t.Errorf("evt_wake routed %d times, want 1", n)
	}
}
