package ledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
)

// Each test checks the destination's own records: one effect per operation.

func TestLedgerConfirmsOnceWithStableKey(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong"})
	w.deliver(checkout{eventID: "evt_1", enquiry: "enq_1", amount: 500})
	opp := w.waitFor("open_opportunity", "enq_1", "confirmed")
	mail := w.waitFor("send_welcome_email", "enq_1", "confirmed")

	recs := w.crm.Records()
	if len(recs) != 1 {
		t.Fatalf("CRM holds %d records, want 1", len(recs))
	}
	rec := recs[0]
	if rec.ID != opp.ExternalRef || rec.IdempotencyKey != opp.OperationKey || rec.Fields["source_ref"] != opp.OperationKey {
		t.Errorf("record %+v does not carry the action's key %s / ref %s", rec, opp.OperationKey, opp.ExternalRef)
	}
	if rec.Fields["enquiry_id"] != "enq_1" {
		t.Errorf("record fields %v, want the rendered params", rec.Fields)
	}
	if strings.Contains(opp.OperationKey, "enq_1") || strings.Contains(opp.OperationKey, "ada@") {
		t.Errorf("operation key %q carries payload data", opp.OperationKey)
	}
	msgs := w.mail.Messages()
	if len(msgs) != 1 || msgs[0].MessageID != mail.ExternalRef || !strings.Contains(mail.ExternalRef, mail.OperationKey) {
		t.Fatalf("mail sink holds %+v; want one message whose Message-ID %q derives from %s", msgs, mail.ExternalRef, mail.OperationKey)
	}
	if !strings.Contains(msgs[0].Body, opp.ExternalRef) {
		t.Errorf("the email did not receive the CRM step's result %s: %q", opp.ExternalRef, msgs[0].Body)
	}
}

func TestLedgerDuplicateDeliveries(t *testing.T) {
	t.Parallel()
	t.Run("ThreeInARow", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{})
		c := checkout{eventID: "evt_seq", enquiry: "enq_seq"}
		for range 3 {
			w.deliver(c)
		}
		w.waitFor("open_opportunity", "enq_seq", "confirmed")
		w.waitFor("send_welcome_email", "enq_seq", "confirmed")
		if n := w.crm.CountByRef(w.actions("open_opportunity")[0].OperationKey); n != 1 || len(w.crm.Records()) != 1 {
			t.Errorf("CRM records: %d for the key, %d in all; want 1", n, len(w.crm.Records()))
		}
		if n := len(w.mail.Messages()); n != 1 {
			t.Errorf("%d emails, want 1", n)
		}
	})
	for _, copies := range []int{2, 20} {
		t.Run(map[int]string{2: "TwoAtOnce", 20: "TwentyAtOnce"}[copies], func(t *testing.T) {
			t.Parallel()
			w := newWorld(t, worldOptions{})
			c := checkout{eventID: "evt_par", enquiry: "enq_par"}
			var wg sync.WaitGroup
			start := make(chan struct{})
			for range copies {
				wg.Add(1)
				go func() { defer wg.Done(); <-start; w.deliver(c) }()
			}
			close(start)
			wg.Wait()
			w.waitFor("send_welcome_email", "enq_par", "confirmed")
			if n := len(w.crm.Records()); n != 1 {
				t.Errorf("CRM holds %d records, want 1", n)
			}
			if n := len(w.mail.Messages()); n != 1 {
				t.Errorf("%d emails, want 1", n)
			}
		})
	}
}

func TestLedgerBusinessIdentity(t *testing.T) {
	t.Parallel()
	t.Run("TwoEventsOneOperation", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{})
		w.deliver(checkout{eventID: "evt_a", enquiry: "enq_same", amount: 10})
		second := w.deliver(checkout{eventID: "evt_b", enquiry: "enq_same", amount: 10})
		a := w.waitFor("open_opportunity", "enq_same", "confirmed")
		w.waitFor("send_welcome_email", "enq_same", "confirmed")
		// The second event may be routed (and linked) only after the action the
		// first one created was performed: nothing orders the two.
		w.waitEvent(fmt.Sprint(second["event_id"]))
		if n := len(w.crm.Records()); n != 1 {
			t.Errorf("CRM holds %d records, want 1", n)
		}
		if evs := w.detail(a.ID)["events"].([]any); len(evs) != 2 {
			t.Errorf("action links %d events, want both", len(evs))
		}
	})
	t.Run("OneCustomerTwoEnquiries", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{})
		w.deliver(checkout{eventID: "evt_x", enquiry: "enq_x", email: "same@example.com"})
		w.deliver(checkout{eventID: "evt_y", enquiry: "enq_y", email: "same@example.com"})
		x := w.waitFor("open_opportunity", "enq_x", "confirmed")
		y := w.waitFor("open_opportunity", "enq_y", "confirmed")
		if x.OperationKey == y.OperationKey {
			t.Errorf("two enquiries share operation key %s", x.OperationKey)
		}
		if n := len(w.crm.Records()); n != 2 {
			t.Errorf("CRM holds %d records, want 2", n)
		}
	})
}

func TestLedgerConflicts(t *testing.T) {
	t.Parallel()
	t.Run("ChangedPayloadUnderKnownDelivery", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{})
		first := w.deliver(checkout{eventID: "evt_chg", enquiry: "enq_chg", amount: 100})
		w.waitFor("open_opportunity", "enq_chg", "confirmed")
		again := w.deliver(checkout{eventID: "evt_chg", enquiry: "enq_chg", amount: 999})
		if again["duplicate"] != true || again["event_id"] != first["event_id"] {
			t.Fatalf("changed repeat answered %v", again)
		}
		ev := w.waitEvent(first["event_id"].(string))
		if ev["conflict"] != true || len(ev["conflicting_bodies"].([]any)) != 1 {
			t.Errorf("event not flagged as a conflict: %v", ev)
		}
		w.waitFor("send_welcome_email", "enq_chg", "confirmed")
		if recs := w.crm.Records(); len(recs) != 1 || fmt.Sprint(recs[0].Fields["amount"]) != "100" {
			t.Errorf("CRM records %+v; want one with the original amount", recs)
		}
	})
	t.Run("ChangedParamsForKnownOperation", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{})
		w.deliver(checkout{eventID: "evt_p1", enquiry: "enq_p", amount: 100})
		w.waitFor("open_opportunity", "enq_p", "confirmed")
		second := w.deliver(checkout{eventID: "evt_p2", enquiry: "enq_p", amount: 250})
		ev := w.waitEvent(second["event_id"].(string))
		if ev["status"] != "conflict" {
			t.Errorf("event with different params has status %v, want conflict", ev["status"])
		}
		a := w.actions("open_opportunity")[0]
		evs := w.detail(a.ID)["events"].([]any)
		if len(evs) != 2 {
			t.Fatalf("action shows %d events, want both parameter sets", len(evs))
		}
		var amounts []any
		for _, e := range evs {
			amounts = append(amounts, e.(map[string]any)["params"].(map[string]any)["amount"])
		}
		if amounts[0] != float64(100) || amounts[1] != float64(250) {
			t.Errorf("parameter sets side by side = %v, want [100 250]", amounts)
		}
		if n := len(w.crm.Records()); n != 1 {
			t.Errorf("CRM holds %d records, want 1", n)
		}
	})
	t.Run("ChangedParamsBeforePerforming", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{noEngine: true})
		w.deliver(checkout{eventID: "evt_q1", enquiry: "enq_q", amount: 100})
		w.deliver(checkout{eventID: "evt_q2", enquiry: "enq_q", amount: 250})
		w.startEngine(0)
		a := w.waitFor("open_opportunity", "enq_q", "failed")
		if !strings.Contains(a.Reason, "conflict") {
			t.Errorf("reason %q, want the conflict named", a.Reason)
		}
		if n := len(w.crm.Records()); n != 0 {
			t.Errorf("CRM holds %d records; a conflict must wait for a person", n)
		}
	})
}

func TestLedgerOrderingAndCancellation(t *testing.T) {
	t.Parallel()
	t.Run("OlderEventAfterNewer", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{})
		w.deliver(checkout{eventID: "evt_new", sessionID: "cs_1", enquiry: "enq_new", created: 2000})
		w.waitFor("open_opportunity", "enq_new", "confirmed")
		old := w.deliver(checkout{eventID: "evt_old", sessionID: "cs_1", enquiry: "enq_old", created: 1000})
		if ev := w.waitEvent(old["event_id"].(string)); ev["status"] != "stale" {
			t.Errorf("older event status %v, want stale", ev["status"])
		}
		if n := len(w.actions("open_opportunity")); n != 1 {
			t.Errorf("%d actions; the stale event must start none", n)
		}
		if n := len(w.crm.Records()); n != 1 {
			t.Errorf("CRM holds %d records, want 1", n)
		}
	})
	t.Run("OlderEventAfterCancellation", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{noEngine: true})
		w.deliver(checkout{eventID: "evt_o1", sessionID: "cs_2", enquiry: "enq_c", created: 1000})
		w.deliver(checkout{eventID: "evt_cancel", sessionID: "cs_2", enquiry: "enq_c", created: 3000, typ: "checkout.session.expired"})
		w.startEngine(0)
		w.waitFor("open_opportunity", "enq_c", "cancelled")
		late := w.deliver(checkout{eventID: "evt_o2", sessionID: "cs_2", enquiry: "enq_c", created: 2000})
		if ev := w.waitEvent(late["event_id"].(string)); ev["status"] != "stale" {
			t.Errorf("late event status %v, want stale", ev["status"])
		}
		a := w.actions("open_opportunity")
		if len(a) != 1 || a[0].State != "cancelled" {
			t.Errorf("actions %+v; the cancelled one must stay cancelled", a)
		}
		if m := w.actions("send_welcome_email"); len(m) != 1 || m[0].State != "cancelled" {
			t.Errorf("email step %+v; a successor of a cancelled action is cancelled too", m)
		}
		if n := len(w.crm.Records()); n != 0 {
			t.Errorf("CRM holds %d records, want 0", n)
		}
	})
}

var _ = sandbox.Fault{}

// TestIndependentRulesRoutedInRuns routes events whose rules depend on nothing else
// (no resource, no predecessor), whose action inserts go to the database together:
// a repeat of an operation links to the action the first created, different params
// flag a conflict, and an event whose content the database refuses is set aside
// without holding up the others.
func TestIndependentRulesRoutedInRuns(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	post := func(body string) string {
		t.Helper()
		hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: []byte(body)})
		if err != nil {
			t.Fatal(err)
		}
		status, out := w.request("POST", "/hooks/stripe-simple", hdr, []byte(body))
		if status != http.StatusOK {
			t.Fatalf("deliver: %d %v", status, out)
		}
		return out["event_id"].(string)
	}
	event := func(id, enquiry, amount string) string {
		return fmt.Sprintf(`{"id":%q,"type":"checkout.session.completed","created":1700000000,`+
			`"data":{"object":{"id":"cs_%s","amount_total":%s,"metadata":{"enquiry_id":%q}}}}`, id, enquiry, amount, enquiry)
	}
	first := []string{
		post(event("evt_r1", "enq_r1", "10")),
		post(event("evt_r2", "enq_r2", "20")),
		post(event("evt_r1b", "enq_r1", "10")), // the same operation, the same params
		post(event("evt_r2b", "enq_r2", "25")), // the same operation, other params
		post(event("evt_r3", "enq_r3", "30")),
		post(`{"id":"evt_r4","type":"checkout.session.completed","created":1700000000,"data":{"object":{}}}`), // no key
	}
	w.route()
	wantStatus := []string{"routed", "routed", "routed", "conflict", "routed", "ignored"}
	for i, id := range first {
		if got := w.waitEvent(id)["status"]; got != wantStatus[i] {
			t.Errorf("event %s: status %v, want %s", id, got, wantStatus[i])
		}
	}
	actions := w.actions("log_checkout")
	if len(actions) != 3 {
		t.Fatalf("%d actions, want 3 (one per operation): %+v", len(actions), actions)
	}
	for _, a := range actions {
		want := "pending"
		if a.BusinessKey == "enq_r2" {
			want = "failed" // a person decides between the two params
		}
		if a.State != want {
			t.Errorf("%s: state %s (%s), want %s", a.BusinessKey, a.State, a.Reason, want)
		}
	}
	if n := w.count(`SELECT count(*) FROM action_events ae JOIN actions a ON a.client = ae.client AND a.id = ae.action_id
		WHERE a.name = 'log_checkout'`); n != 5 {
		t.Errorf("%d links, want 5: every event with a key, to its operation's action", n)
	}
	// Of two events in one run for one operation, the first creates the action,
	// with its params; the actions are created in the order of their events.
	if n := w.count(`SELECT count(*) FROM actions WHERE name = 'log_checkout' AND business_key = 'enq_r2'
		AND params->>'amount' = '20'`); n != 1 {
		t.Errorf("the action for enq_r2 does not carry the first event's params (amount 20)")
	}
	if n := w.count(`SELECT count(*) FROM actions WHERE name = 'log_checkout'
		AND occurred_at = to_timestamp(1700000000)`); n != 3 {
		t.Errorf("%d of 3 actions carry their event's time (created 1700000000)", n)
	}
	if n := w.count(`SELECT count(*) FROM (SELECT business_key, row_number() OVER (ORDER BY id) AS i
		FROM actions WHERE name = 'log_checkout') a
		WHERE (business_key, i) IN (('enq_r1', 1), ('enq_r2', 2), ('enq_r3', 3))`); n != 3 {
		t.Errorf("actions not created in the order of their events")
	}

	// A NUL in a param cannot be stored as jsonb: that event is set aside, the
	// events beside it in the batch are routed.
	second := []string{
		post(event("evt_r5", "enq_r5", "50")),
		post(event("evt_r6", "enq_r6", `"\u0000"`)),
		post(event("evt_r7", "enq_r7", "70")),
	}
	w.route()
	for i, want := range []string{"routed", "ignored", "routed"} {
		ev := w.waitEvent(second[i])
		if ev["status"] != want {
			t.Errorf("event %s: status %v (%v), want %s", second[i], ev["status"], ev["reason"], want)
		}
		if want == "ignored" && !strings.Contains(fmt.Sprint(ev["reason"]), "cannot be stored") {
			t.Errorf("event %s: reason %v; want it to say the content cannot be stored", second[i], ev["reason"])
		}
	}
	if n := len(w.actions("log_checkout")); n != 5 {
		t.Errorf("%d actions, want 5", n)
	}
}

// TestEventStoredByAnOlderReleaseIsRouted: during a rolling deploy a process of the
// release before event_queue still stores deliveries with a plain INSERT; the
// trigger on events queues them, so the router routes them too.
func TestEventStoredByAnOlderReleaseIsRouted(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	body := checkout{eventID: "evt_old", enquiry: "enq_old"}.body()
	w.exec(`INSERT INTO events (client, environment, source, source_event_id, type, body, body_sha256)
		VALUES ('acme', 'live', 'stripe-live', 'evt_old', 'checkout.session.completed', $1, sha256($1))`, body)
	if n := w.count(`SELECT count(*) FROM event_queue`); n != 1 {
		t.Fatalf("%d queued events, want the one stored", n)
	}
	w.route()
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = 'evt_old' AND status = 'routed'`); n != 1 {
		t.Errorf("the event stored the old way was not routed")
	}
	if a := w.actions("open_opportunity"); len(a) != 1 || a[0].BusinessKey != "enq_old" {
		t.Errorf("actions %+v; want the one the event asked for", a)
	}
	if n := w.count(`SELECT count(*) FROM event_queue`); n != 0 {
		t.Errorf("%d events still queued after routing", n)
	}
}

// TestEventRoutedByAnOlderRouterIsNotRoutedAgain: during a rolling deploy a router of
// the release before event_queue claims by status and routes an event while this
// release's router claims the same event from the queue. This router waits for the
// other's transaction, sees the event routed, and leaves it alone. (The older
// router's claim names the one client, as any claim on Citus must.)
func TestEventRoutedByAnOlderRouterIsNotRoutedAgain(t *testing.T) {
	dbtest.SinglePostgresOnly(t, "it waits for the router's lock wait in pg_locks, which on Citus is a worker's, not the coordinator's")
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	id := w.deliver(checkout{eventID: "evt_both", enquiry: "enq_both"})["event_id"].(string)
	ctx := context.Background()
	old, err := w.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Rollback(ctx) //nolint:errcheck // after commit: nothing to do
	if _, err := old.Exec(ctx, `SELECT id FROM events WHERE client = 'acme' AND status = 'received' FOR UPDATE SKIP LOCKED`); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Exec(ctx, `UPDATE events SET status = 'ignored', reason = 'routed by the older release' WHERE client = 'acme' AND id = $1`, id); err != nil {
		t.Fatal(err)
	}
	routed := make(chan error, 1)
	go func() {
		eng := engine.New(engine.Params{Pool: w.pool, Config: w.cfg,
			Logger: slog.New(slog.NewTextHandler(w.logs, nil))})
		_, err := eng.RouteBatch(ctx, 100)
		routed <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for w.count(`SELECT count(*) FROM pg_locks WHERE locktype = 'transactionid' AND NOT granted`) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the router never waited for the older router's lock")
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if err := old.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-routed; err != nil {
		t.Fatal(err)
	}
	if got := w.waitEvent(id); got["status"] != "ignored" || got["reason"] != "routed by the older release" {
		t.Errorf("event %v; want the older router's outcome kept", got)
	}
	if a := w.actions("open_opportunity"); len(a) != 0 {
		t.Errorf("actions %+v; want none: the older router decided this event", a)
	}
	if n := w.count(`SELECT count(*) FROM event_queue`); n != 0 {
		t.Errorf("%d events still queued", n)
	}
}

// The engine never has more calls in flight than it has call slots: with 4 slots
// and every CRM call held until the test lets one go, at most 4 calls reach the
// CRM at once, each release lets exactly one more in, and in the end every action
// is confirmed with one record.
func TestCallsInFlightStayWithinSlots(t *testing.T) {
	t.Parallel()
	const slots, n = 4, 12
	var mu sync.Mutex
	held, peak := 0, 0 // calls waiting at the gate; the test counts a release itself
	gate := make(chan struct{})
	w := newWorld(t, worldOptions{noEngine: true, crmWrap: func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				mu.Lock()
				held++
				peak = max(peak, held)
				mu.Unlock()
				select {
				case <-gate:
				case <-r.Context().Done():
				}
			}
			h.ServeHTTP(rw, r)
		})
	}})
	for i := range n {
		w.deliver(checkout{eventID: fmt.Sprintf("evt_slot_%d", i), enquiry: fmt.Sprintf("enq_slot_%d", i), amount: 100})
	}
	w.startEngineWith(func(p *engine.Params) { p.Concurrency = slots })
	heldNow := func() int {
		mu.Lock()
		defer mu.Unlock()
		return held
	}
	for released := 0; released < n; released++ {
		want := min(slots, n-released) // every slot busy, or every call left
		deadline := time.Now().Add(20 * time.Second)
		for heldNow() != want {
			if time.Now().After(deadline) {
				t.Fatalf("after %d releases: %d CRM calls held, want %d", released, heldNow(), want)
			}
			time.Sleep(5 * time.Millisecond) // poll interval
		}
		mu.Lock()
		held-- // before the call goes on, so the next wait sees only calls still held
		mu.Unlock()
		gate <- struct{}{}
	}
	for i := range n {
		w.waitFor("open_opportunity", fmt.Sprintf("enq_slot_%d", i), "confirmed")
	}
	mu.Lock()
	defer mu.Unlock()
	if peak != slots {
		t.Errorf("at most %d CRM calls were in flight at once, want %d (the engine's slots)", peak, slots)
	}
	if got := w.crm.Len(); got != n {
		t.Errorf("CRM holds %d records, want %d", got, n)
	}
}
