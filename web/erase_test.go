package web_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

// eraseCheckout is a checkout of enquiry paid by email, with a note, as Stripe signs it.
func eraseCheckout(eventID, enquiry, email, note string) []byte {
	return []byte(`{"id":"` + eventID + `","type":"checkout.session.completed","created":1700000000,` +
		`"data":{"object":{"id":"cs_` + eventID + `","amount_total":4200,"customer_details":{"email":"` + email + `"},` +
		`"metadata":{"enquiry_id":"` + enquiry + `","note":"` + note + `"}}}}`)
}

// apiCall calls the JSON API with token and wants status; it returns the reply's text too.
func (d *dashboard) apiCall(token, method, path string, body any, want int) (map[string]any, string) {
	d.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	hdr := http.Header{"Authorization": {"Bearer " + token}, "Content-Type": {"application/json"}}
	out := d.call(method, "/api/v1"+path, hdr, b, want)
	raw, _ := json.Marshal(out)
	return out, string(raw)
}

// TestEraseByBusinessKey: an admin erases a person's checkout by its business
// key. Afterwards the event's page, the actions' pages, the API, the CSV, the
// search and every table hold none of what the person sent; the audit names the
// act, who and why; a redelivery of the erased event is a duplicate and a new
// event for the same operation is linked to it: the CRM and the mail sink still
// hold one effect each.
func TestEraseByBusinessKey(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	ctx := context.Background()
	const enquiry, email, note = "enq_erin", "erin@example.org", "erin lives at 12 Elm Row"
	body := eraseCheckout("evt_erase", enquiry, email, note)
	evID := d.post(body)["event_id"].(string)
	opp := d.waitAction("open_opportunity", enquiry, ledger.StateConfirmed)
	mail := d.waitAction("send_welcome_email", enquiry, ledger.StateConfirmed)
	// A repeat whose body differs is kept beside the event, as evidence.
	d.post(eraseCheckout("evt_erase", enquiry, email, note+" (flat 2)"))

	admin, err := accounts.CreateToken(ctx, d.pool, "dpo", settings.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	operator, err := accounts.CreateToken(ctx, d.pool, "ops", settings.RoleOperator, "acme")
	if err != nil {
		t.Fatal(err)
	}
	secrets := []string{enquiry, email, "12 Elm Row"}
	ops := d.person()
	ops.login(adminEmail)
	if pg := ops.get("/actions?q=" + strings.ReplaceAll(note, " ", "+")); !strings.Contains(pg.body, itemPath(opp)) {
		t.Fatalf("before the erasure the search for the note does not find %s", itemPath(opp))
	}

	out, _ := d.apiCall(operator, http.MethodPost, "/erase", map[string]any{"business_key": enquiry, "reason": "GDPR request 17"},
		http.StatusForbidden)
	if !strings.Contains(fmt.Sprint(out["error"]), "Only admins erase") {
		t.Errorf("an operator's erase: %v", out)
	}
	_, raw := d.apiCall(admin, http.MethodPost, "/erase", map[string]any{"business_key": enquiry, "client": "acme",
		"reason": "GDPR request 17"}, http.StatusOK)
	want := fmt.Sprintf(`{"actions":[{"client":"acme","id":"%d"},{"client":"acme","id":"%d"}],"events":[{"client":"acme","id":"%s"}]}`,
		min(opp.ID, mail.ID), max(opp.ID, mail.ID), evID)
	if raw != want {
		t.Errorf("erase replied %s, want %s", raw, want)
	}

	sum := sha256.Sum256([]byte(enquiry))
	hashed := "sha256:" + hex.EncodeToString(sum[:])
	pages := map[string]string{}
	for _, path := range []string{"/events/" + evID + "?client=acme", itemPath(opp), itemPath(mail), "/events",
		"/actions?format=csv", "/actions?q=" + enquiry, "/actions?q=" + email, "/actions?q=" + strings.ReplaceAll(note, " ", "+")} {
		pg := ops.get(path)
		if pg.status != http.StatusOK {
			t.Fatalf("%s: %d", path, pg.status)
		}
		pages[path] = pg.body
	}
	for _, path := range []string{"/events/" + evID, fmt.Sprintf("/actions/%d", opp.ID), fmt.Sprintf("/actions/%d", mail.ID),
		"/actions?q=" + enquiry, "/events?source=stripe-live"} {
		_, pages["API "+path] = d.apiCall(admin, http.MethodGet, path, nil, http.StatusOK)
	}
	for where, text := range pages {
		if strings.HasPrefix(where, "/actions?q=") {
			continue // the search's own box shows what was asked; its rows are checked below
		}
		for _, s := range secrets {
			if strings.Contains(text, s) {
				t.Errorf("%s still shows %q", where, s)
			}
		}
	}
	for _, path := range []string{"/actions?q=" + enquiry, "/actions?q=" + email, "/actions?q=" + strings.ReplaceAll(note, " ", "+")} {
		if strings.Contains(pages[path], itemPath(opp)) {
			t.Errorf("the search %s still finds the erased action", path)
		}
	}
	if !strings.Contains(pages[itemPath(opp)], hashed) || !strings.Contains(pages[itemPath(opp)], `id="erased"`) {
		t.Errorf("the action's page shows neither the key's hash %s nor that it was erased", hashed)
	}
	if !strings.Contains(pages["/events/"+evID+"?client=acme"], `id="erased"`) {
		t.Errorf("the event's page does not say its body was erased")
	}
	if !strings.Contains(pages["API /events/"+evID], `"source_event_id":"evt_erase"`) {
		t.Errorf("the erased event lost its identity: %s", pages["API /events/"+evID])
	}
	for _, table := range []string{"events", "event_bodies", "event_conflicts", "action_events", "actions", "attempts",
		"audit", "corrections", "event_audit"} {
		for _, s := range secrets {
			var n int
			if err := d.pool.QueryRow(ctx, fmt.Sprintf(`SELECT count(*) FROM %s t WHERE strpos(t::text, $1) > 0`, table), s).Scan(&n); err != nil {
				t.Fatal(err)
			}
			if n != 0 {
				t.Errorf("%d rows of %s still hold %q", n, table, s)
			}
		}
	}
	checkEraseAudit(t, d, evID, opp.ID, mail.ID)

	// The erased event again, byte for byte: a duplicate. A new event for the
	// same enquiry: linked to the erased operations, performed by neither.
	if r := d.post(body); r["duplicate"] != true || r["event_id"] != evID {
		t.Errorf("the erased event's redelivery: %v, want a duplicate of %s", r, evID)
	}
	again := d.post(eraseCheckout("evt_erase_again", enquiry, email, ""))["event_id"].(string)
	waitRouted(t, d, again)
	if n := d.count(`SELECT count(*) FROM action_events WHERE event_id = $1 AND action_id IN ($2, $3)`, again, opp.ID, mail.ID); n != 2 {
		t.Errorf("the new event is linked to %d of the two erased actions", n)
	}
	if n := d.count(`SELECT count(*) FROM actions`); n != 2 {
		t.Errorf("%d actions after the new event, want the 2 erased ones", n)
	}
	if n := d.crm.CountByRef(opp.OperationKey); n != 1 {
		t.Errorf("the CRM holds %d opportunities for the operation, want 1", n)
	}
	if n := len(d.mail.Messages()); n != 1 {
		t.Errorf("the mail sink holds %d messages, want 1", n)
	}
}

// checkEraseAudit: the event and both actions have one erase line naming who and
// why, and not what.
func checkEraseAudit(t *testing.T, d *dashboard, evID string, actions ...int64) {
	t.Helper()
	rows, err := d.pool.Query(context.Background(), `
		SELECT 'event', actor, note, detail::text FROM event_audit WHERE event_id = $1::bigint AND act = 'erase'
		UNION ALL
		SELECT 'action', actor, note, detail::text FROM audit WHERE action_id = ANY($2) AND act = 'erase'`, evID, actions)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var kind, actor, note, detail string
		if err := rows.Scan(&kind, &actor, &note, &detail); err != nil {
			t.Fatal(err)
		}
		n++
		if actor != "token:dpo" || note != "GDPR request 17" || detail != "{}" {
			t.Errorf("%s's erase line: %s, %q, %s; want token:dpo, the reason, nothing of what", kind, actor, note, detail)
		}
	}
	if n != 1+len(actions) {
		t.Errorf("%d erase lines, want one for the event and one for each of the %d actions", n, len(actions))
	}
}

// itemPath is an action's page, as the dashboard links it.
func itemPath(a ledger.Action) string { return fmt.Sprintf("/actions/%d?client=%s", a.ID, a.Client) }

// waitRouted polls until the event has left the router's queue.
func waitRouted(t *testing.T, d *dashboard, id string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for d.count(`SELECT count(*) FROM events WHERE id = $1::bigint AND status = 'received'`, id) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("event %s was never routed", id)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

func (d *dashboard) count(sql string, args ...any) int {
	d.t.Helper()
	var n int
	if err := d.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		d.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

// TestEraseRefusesAnOpenAction: an event whose action failed (it waits for a
// person, who may correct its params) is not erased, and nothing of it is: the
// reply names the action and its state. Once cancelled, it is erased.
func TestEraseRefusesAnOpenAction(t *testing.T) {
	t.Parallel()
	d := newDashboard(t)
	ctx := context.Background()
	d.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved", Field: "enquiry_id", Value: "enq_open"})
	evID := d.post(eraseCheckout("evt_open", "enq_open", "olga@example.org", "call after 6"))["event_id"].(string)
	failed := d.waitAction("open_opportunity", "enq_open", ledger.StateFailed)
	d.waitAction("send_welcome_email", "enq_open", ledger.StateConfirmed)
	admin, err := accounts.CreateToken(ctx, d.pool, "dpo", settings.RoleAdmin)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := d.apiCall(admin, http.MethodPost, "/erase", map[string]any{"event": evID, "reason": "GDPR request 18"}, http.StatusConflict)
	msg := fmt.Sprint(out["error"])
	if !strings.Contains(msg, fmt.Sprintf("action %d (open_opportunity) is failed, not final", failed.ID)) ||
		!strings.Contains(msg, "Nothing was erased") {
		t.Errorf("the refusal says %q", msg)
	}
	if n := d.count(`SELECT count(*) FROM actions WHERE strpos(params::text, 'olga@example.org') > 0`); n != 1 {
		t.Errorf("%d actions still hold the email after the refusal, want the mail's 1: nothing is erased", n)
	}
	if n := d.count(`SELECT count(*) FROM event_audit WHERE act = 'erase'`) + d.count(`SELECT count(*) FROM audit WHERE act = 'erase'`); n != 0 {
		t.Errorf("%d erase lines after a refusal", n)
	}
	d.apiCall(admin, http.MethodPost, fmt.Sprintf("/actions/%d/cancel", failed.ID), map[string]any{"note": "customer left"}, http.StatusOK)
	_, raw := d.apiCall(admin, http.MethodPost, "/erase", map[string]any{"event": evID, "reason": "GDPR request 18"}, http.StatusOK)
	if !strings.Contains(raw, `"events":[{"client":"acme","id":"`+evID+`"}]`) {
		t.Errorf("the erasure after the cancel: %s", raw)
	}
	if n := d.count(`SELECT count(*) FROM actions WHERE strpos(params::text, 'olga@example.org') > 0`); n != 0 {
		t.Errorf("%d actions still hold the email", n)
	}
	out, _ = d.apiCall(admin, http.MethodPost, "/erase", map[string]any{"event": evID, "reason": "again"}, http.StatusConflict)
	if msg := fmt.Sprint(out["error"]); !strings.Contains(msg, "was erased already") {
		t.Errorf("a second erasure of the event says %q", msg)
	}
}
