package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/smtp"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/cutover"
	"github.com/oncehook/oncehook/internal/ledger"
)

// oldIntegration is what a client's earlier integration did before the switch:
// CRM records created with its own references and welcome mails sent from its own
// server, each written down as a line of the file oncehook imports.
type oldIntegration struct {
	w     *world
	lines bytes.Buffer
}

// opportunity creates a record in the CRM as the old integration did (its own
// source_ref) and writes the line that says so.
func (o *oldIntegration) opportunity(enquiry string, amount int) {
	o.w.t.Helper()
	body := fmt.Sprintf(`{"enquiry_id":%q,"amount":%d,"source_ref":"legacy-%s"}`, enquiry, amount, enquiry)
	req, _ := http.NewRequest(http.MethodPost, o.w.crmURL+"/opportunities", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+crmToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		o.w.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var rec struct{ ID string }
	if err := json.Unmarshal(raw, &rec); err != nil || res.StatusCode/100 != 2 || rec.ID == "" {
		o.w.t.Fatalf("the old integration's create: %d %s", res.StatusCode, raw)
	}
	line, _ := json.Marshal(map[string]any{"action": "open_opportunity", "key": []string{enquiry},
		"external_ref": rec.ID, "performed_at": "2026-11-30T10:00:00Z",
		"params": map[string]any{"enquiry_id": enquiry, "amount": amount}, "result": map[string]any{"id": rec.ID}})
	o.lines.Write(append(line, '\n'))
}

// welcome sends the welcome mail as the old integration did and writes its line
// (without params: the old system kept only the message's reference).
func (o *oldIntegration) welcome(enquiry, to string) {
	o.w.t.Helper()
	id := "<legacy-" + enquiry + "@old.example.com>"
	msg := "From: hello@example.com\r\nTo: " + to + "\r\nSubject: Welcome\r\nMessage-ID: " + id + "\r\n\r\nThanks!\r\n"
	if err := smtp.SendMail(o.w.mail.Addr(), nil, "hello@example.com", []string{to}, []byte(msg)); err != nil {
		o.w.t.Fatal(err)
	}
	line, _ := json.Marshal(map[string]any{"action": "send_welcome_email", "key": []string{enquiry},
		"external_ref": id, "performed_at": "2026-11-30T10:00:05Z"})
	o.lines.Write(append(line, '\n'))
}

// TestImportedOperationsAreNotPerformedAgain: the old integration made 50 CRM
// records and sent their 50 welcome mails; the file of them is imported; Stripe
// then redelivers those 50 events and 50 new ones arrive. The CRM holds exactly
// 100 records and the mail sink one welcome per customer, 100 in all: nothing
// the old system did is done again, and the redeliveries are no conflicts.
func TestImportedOperationsAreNotPerformedAgain(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong"})
	ctx := context.Background()
	const n = 50
	old := &oldIntegration{w: w}
	email := func(enquiry string) string { return enquiry + "@example.com" }
	for i := range n {
		enq := fmt.Sprintf("enq-old-%d", i)
		old.opportunity(enq, 100+i)
		old.welcome(enq, email(enq))
	}
	p := cutover.Params{Pool: w.pool, Config: w.cfg, Client: "acme", File: "old.jsonl", By: "ada"}
	rep, err := cutover.Import(ctx, p, bytes.NewReader(old.lines.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if rep.New != 2*n || rep.ByAction["open_opportunity"] != n || rep.ByAction["send_welcome_email"] != n {
		t.Fatalf("import: %+v, want %d of each action", rep, n)
	}
	// The same file again changes nothing.
	rep, err = cutover.Import(ctx, p, bytes.NewReader(old.lines.Bytes()))
	if err != nil || rep.New != 0 || rep.Already != 2*n {
		t.Fatalf("the second import: %+v %v, want all %d already recorded", rep, err, 2*n)
	}
	if a := w.count(`SELECT count(*) FROM audit WHERE act = 'import' AND note = 'imported from old.jsonl by ada'`); a != 2*n {
		t.Errorf("%d audit entries of the import, want %d", a, 2*n)
	}

	var eventIDs []string
	for i := range 2 * n { // the 50 redelivered, then 50 new
		enq := fmt.Sprintf("enq-old-%d", i)
		if i >= n {
			enq = fmt.Sprintf("enq-new-%d", i)
		}
		out := w.deliver(checkout{eventID: "evt_" + enq, enquiry: enq, amount: 100 + i, email: email(enq)})
		eventIDs = append(eventIDs, fmt.Sprint(out["event_id"]))
	}
	for i := n; i < 2*n; i++ {
		w.waitFor("send_welcome_email", fmt.Sprintf("enq-new-%d", i), ledger.StateConfirmed)
	}
	for i, id := range eventIDs {
		if ev := w.waitEvent(id); ev["status"] != ledger.EventRouted {
			t.Errorf("event %d (%s) is %v, want routed", i, id, ev["status"])
		}
	}
	if got := w.crm.Len(); got != 2*n {
		t.Errorf("the CRM holds %d records, want %d", got, 2*n)
	}
	sent := map[string]int{}
	for _, m := range w.mail.Messages() {
		for _, to := range m.To {
			sent[to]++
		}
	}
	if len(sent) != 2*n {
		t.Errorf("welcome mails went to %d customers, want %d", len(sent), 2*n)
	}
	for to, k := range sent {
		if k != 1 {
			t.Errorf("%s got %d welcome mails, want 1", to, k)
		}
	}
	if calls := w.count(`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id
		WHERE a.business_key LIKE 'enq-old-%'`); calls != 0 {
		t.Errorf("%d calls were made for operations the old integration had done", calls)
	}
	if open := w.count(`SELECT count(*) FROM actions WHERE state <> 'confirmed'`); open != 0 {
		t.Errorf("%d actions are not confirmed", open)
	}
}

// TestImportSuccessorRunsUnlessListed: an imported create whose welcome mail the
// file does not list: the event that arrives next performs the mail (its
// predecessor is confirmed), with the record id the file gave as its result.
func TestImportSuccessorRunsUnlessListed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	line := `{"action":"open_opportunity","key":["enq-s"],"external_ref":"opp_legacy_7","performed_at":"2026-11-30T10:00:00Z","result":{"id":"opp_legacy_7"}}` + "\n"
	if _, err := cutover.Import(context.Background(), cutover.Params{Pool: w.pool, Config: w.cfg, Client: "acme",
		File: "one.jsonl", By: "ada"}, strings.NewReader(line)); err != nil {
		t.Fatal(err)
	}
	w.deliver(checkout{eventID: "evt_s", enquiry: "enq-s", amount: 7})
	w.waitFor("send_welcome_email", "enq-s", ledger.StateConfirmed)
	if w.crm.Len() != 0 {
		t.Errorf("the CRM holds %d records, want none: the create was imported", w.crm.Len())
	}
	msgs := w.mail.Messages()
	if len(msgs) != 1 || !strings.Contains(msgs[0].Body, "opp_legacy_7") {
		t.Errorf("the welcome mail: %+v, want one naming the imported record", msgs)
	}
}
