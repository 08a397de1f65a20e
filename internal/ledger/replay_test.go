package ledger_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/sender"
)

// invoiceRule is a rule added after some invoices were already received.
const invoiceRule = `
  - name: log_invoice
    source: stripe-simple
    on: [invoice.paid]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params: {enquiry_id: /data/object/metadata/enquiry_id}
`

// deliverTo posts a Stripe event of type typ to source and returns its event id.
func (w *world) deliverTo(source, eventID, typ, enquiry string) string {
	w.t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"type":%q,"created":1700000000,"data":{"object":{"id":"in_%s","metadata":{"enquiry_id":%q}}}}`,
		eventID, typ, enquiry, enquiry))
	hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: body})
	if err != nil {
		w.t.Fatal(err)
	}
	status, out := w.request("POST", "/hooks/"+source, hdr, body)
	if status != http.StatusOK {
		w.t.Fatalf("deliver %s: %d %v", eventID, status, out)
	}
	return out["event_id"].(string)
}

func TestReplayAfterAddingARule(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	ev := w.deliverTo("stripe-simple", "evt_inv_1", "invoice.paid", "enq_inv_1")
	w.route()
	first := w.waitEvent(ev)
	if first["status"] != "ignored" || !strings.Contains(first["reason"].(string), `no action rule for event type "invoice.paid"`) {
		t.Fatalf("before the rule: %v %v, want ignored with the reason", first["status"], first["reason"])
	}

	// An admin adds the rule; the server is not restarted for the replay itself.
	w.yaml += invoiceRule
	w.cfg = w.loadConfig()

	replay := func(want int) map[string]any {
		t.Helper()
		status, out := w.api(w.token, "POST", "/events/"+ev+"/replay", map[string]any{"note": "rule log_invoice added"})
		if status != want {
			t.Fatalf("replay: %d %v, want %d", status, out, want)
		}
		return out
	}
	replay(http.StatusAccepted)
	if s := replay(http.StatusConflict); !strings.Contains(s["error"].(string), "waiting to be routed") {
		t.Errorf("replay of a waiting event: %v", s)
	}
	w.route()
	if got := w.waitEvent(ev); got["status"] != "routed" {
		t.Fatalf("after the replay: %v", got["status"])
	}
	if n := w.count(`SELECT count(*) FROM actions WHERE name = 'log_invoice'`); n != 1 {
		t.Fatalf("%d log_invoice actions after the replay, want 1", n)
	}

	// A second replay links the action that exists and creates nothing.
	replay(http.StatusAccepted)
	w.route()
	w.waitEvent(ev)
	if n := w.count(`SELECT count(*) FROM actions WHERE name = 'log_invoice'`); n != 1 {
		t.Errorf("%d log_invoice actions after a second replay, want 1", n)
	}
	if n := w.count(`SELECT count(*) FROM action_events ae JOIN actions a ON a.client = ae.client AND a.id = ae.action_id WHERE a.name = 'log_invoice'`); n != 1 {
		t.Errorf("%d links, want 1", n)
	}

	// Performed, the CRM holds one record for it, whatever the replays.
	w.startEngine(0)
	w.waitFor("log_invoice", "", "confirmed")
	if n := w.crm.Len(); n != 1 {
		t.Errorf("CRM records = %d, want 1", n)
	}

	_, d := w.api(w.token, "GET", "/events/"+ev, nil)
	audit := d["audit"].([]any)
	if len(audit) != 2 {
		t.Fatalf("audit = %v, want two replays", audit)
	}
	line := audit[0].(map[string]any)
	if line["actor"] != "token:ops" || line["act"] != "replay" || line["note"] != "rule log_invoice added" ||
		!strings.Contains(fmt.Sprint(line["detail"]), "ignored") {
		t.Errorf("first audit line = %v, want who, replay, why and the previous status", line)
	}
	if d["via"] != "webhook" {
		t.Errorf("via = %v, want webhook", d["via"])
	}
}

func TestReplayRefusals(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	pruned := w.deliverTo("stripe-simple", "evt_pruned", "invoice.paid", "enq_p")
	w.route()
	// Retention drops the bytes (in event_bodies); the identity stays.
	w.exec(`DELETE FROM event_bodies b USING events e
		WHERE b.client = e.client AND b.event_id = e.id AND e.source_event_id = 'evt_pruned'`)
	status, out := w.api(w.token, "POST", "/events/"+pruned+"/replay", nil)
	if status != http.StatusConflict || !strings.Contains(fmt.Sprint(out["error"]), "retention") {
		t.Errorf("replay of a pruned event: %d %v, want 409 saying the body was dropped by retention", status, out)
	}
	if status, _ := w.api(w.token, "POST", "/events/999999/replay", nil); status != http.StatusNotFound {
		t.Errorf("replay of no event: %d, want 404", status)
	}
	if n := w.count(`SELECT count(*) FROM event_audit`); n != 0 {
		t.Errorf("%d audit lines for refused replays, want 0", n)
	}
}

func TestReplayAllThatMatch(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	for i := range 3 {
		w.deliverTo("stripe-simple", fmt.Sprintf("evt_m%d", i), "invoice.paid", fmt.Sprintf("enq_m%d", i))
	}
	w.deliverTo("stripe-simple", "evt_other", "invoice.voided", "enq_o")
	w.route()
	w.yaml += invoiceRule
	w.cfg = w.loadConfig()

	path := "/events/replay?status=ignored&type=invoice.paid"
	if status, _ := w.api(w.token, "POST", path, map[string]any{"note": "x", "expected": 3}); status != http.StatusForbidden {
		t.Errorf("operator: %d, want 403", status)
	}
	if status, out := w.api(w.admin, "POST", path, map[string]any{"note": "x", "expected": 2}); status != http.StatusConflict {
		t.Errorf("more than confirmed: %d %v, want 409", status, out)
	}
	status, out := w.api(w.admin, "POST", path, map[string]any{"note": "rule added", "expected": 3})
	if status != http.StatusAccepted || len(out["replayed"].([]any)) != 3 {
		t.Fatalf("replay all: %d %v", status, out)
	}
	w.route()
	if n := w.count(`SELECT count(*) FROM actions WHERE name = 'log_invoice'`); n != 3 {
		t.Errorf("%d actions, want 3", n)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = 'evt_other' AND status = 'ignored'`); n != 1 {
		t.Errorf("the event outside the filter was touched")
	}
	if n := w.count(`SELECT count(*) FROM event_audit WHERE actor = 'token:boss' AND note = 'rule added'`); n != 3 {
		t.Errorf("%d audit lines, want 3", n)
	}
}
