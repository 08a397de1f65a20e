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
	"time"

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
	id := seedRecord(o.w, enquiry, amount, "legacy-"+enquiry)
	line, _ := json.Marshal(map[string]any{"action": "open_opportunity", "key": []string{enquiry},
		"external_ref": id, "performed_at": "2026-11-30T10:00:00Z",
		"params": map[string]any{"enquiry_id": enquiry, "amount": amount}, "result": map[string]any{"id": id}})
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

// seedRecord creates a CRM record for enquiry carrying ref as its source_ref, as
// an earlier integration (its own references), another oncehook (the same
// operation keys) or an integration that wrote the same reference would have, and
// returns its id.
func seedRecord(w *world, enquiry string, amount int, ref string) string {
	w.t.Helper()
	body := fmt.Sprintf(`{"enquiry_id":%q,"amount":%d,"source_ref":%q}`, enquiry, amount, ref)
	req, _ := http.NewRequest(http.MethodPost, w.crmURL+"/opportunities", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+crmToken)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	var rec struct{ ID string }
	if err := json.Unmarshal(raw, &rec); err != nil || res.StatusCode/100 != 2 || rec.ID == "" {
		w.t.Fatalf("create a CRM record: %d %s", res.StatusCode, raw)
	}
	return rec.ID
}

// TestCutoverLooksUpBeforeCreating: a cutover window on the Stripe source and no
// import. Events from before it whose records exist are confirmed by lookup, not
// created again; those whose records do not exist are created once; an event
// after the window's start is performed as usual; and the welcome mail, whose
// destination has no lookup, waits for a person with the reason instead of
// being sent, except for the event after the start.
func TestCutoverLooksUpBeforeCreating(t *testing.T) {
	t.Parallel()
	from := time.Now().UTC().Add(-time.Minute).Truncate(time.Second)
	until := from.Add(time.Hour)
	window := fmt.Sprintf(", cutover: {from: %q, until: %q}}", from.Format(time.RFC3339), until.Format(time.RFC3339))
	// A second CRM step after the first: under the cutover it waits for its
	// predecessor uncertain, then is looked up before any create.
	followUp := `  - name: open_follow_up
    source: stripe-live
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    after: open_opportunity
    destination: crm
    params:
      enquiry_id: /data/object/metadata/enquiry_id
`
	w := newWorld(t, worldOptions{lookup: "strong", yaml: func(y string) string {
		return strings.Replace(y, "environment: live, secret_env: STRIPE_SECRET}", "environment: live, secret_env: STRIPE_SECRET"+window, 1) + followUp
	}})
	opKey := func(enq string) string {
		return ledger.OperationIdentity{Client: "acme", Environment: "live", Name: "open_opportunity", KeyParts: []string{enq}}.OperationKey()
	}
	existing := map[string]string{}
	for i := range 5 {
		enq := fmt.Sprintf("enq-had-%d", i)
		existing[enq] = seedRecord(w, enq, 1, opKey(enq))
	}
	followUpKey := ledger.OperationIdentity{Client: "acme", Environment: "live", Name: "open_follow_up", KeyParts: []string{"enq-had-0"}}.OperationKey()
	hadFollowUp := seedRecord(w, "enq-had-0", 1, followUpKey)
	for enq := range existing {
		w.deliver(checkout{eventID: "evt_" + enq, enquiry: enq, amount: 10}) // provider time 2023: before the window
	}
	for i := range 3 {
		enq := fmt.Sprintf("enq-new-%d", i)
		w.deliver(checkout{eventID: "evt_" + enq, enquiry: enq, amount: 10})
	}
	w.deliver(checkout{eventID: "evt_after", enquiry: "enq-after", amount: 10, created: time.Now().Unix()})

	for enq, id := range existing {
		a := w.waitFor("open_opportunity", enq, ledger.StateConfirmed)
		if a.ExternalRef != id {
			t.Errorf("%s was confirmed with %q, want the existing record %q", enq, a.ExternalRef, id)
		}
		m := w.waitFor("send_welcome_email", enq, ledger.StateFailed)
		if !strings.Contains(m.Reason, "cutover from "+from.Format(time.RFC3339)) || !strings.Contains(m.Reason, "no lookup can tell") {
			t.Errorf("%s's welcome mail: %q, want the cutover's reason", enq, m.Reason)
		}
	}
	for i := range 3 {
		w.waitFor("open_opportunity", fmt.Sprintf("enq-new-%d", i), ledger.StateConfirmed)
	}
	w.waitFor("open_opportunity", "enq-after", ledger.StateConfirmed)
	w.waitFor("send_welcome_email", "enq-after", ledger.StateConfirmed)
	// The follow-ups: the one that existed found, the others created once, each
	// after its predecessor was confirmed.
	if a := w.waitFor("open_follow_up", "enq-had-0", ledger.StateConfirmed); a.ExternalRef != hadFollowUp {
		t.Errorf("enq-had-0's follow-up was confirmed with %q, want the existing %q", a.ExternalRef, hadFollowUp)
	}
	for enq := range existing {
		w.waitFor("open_follow_up", enq, ledger.StateConfirmed)
	}
	for _, enq := range []string{"enq-new-0", "enq-new-1", "enq-new-2", "enq-after"} {
		w.waitFor("open_follow_up", enq, ledger.StateConfirmed)
	}
	if early := w.count(`SELECT count(*) FROM actions f JOIN actions p ON p.client = f.client AND p.id = f.after_id
		WHERE f.name = 'open_follow_up' AND f.first_attempt_at < p.updated_at`); early != 0 {
		t.Errorf("%d follow-ups were called before their predecessor was confirmed", early)
	}
	if got := w.crm.Len(); got != 6+4+8 {
		t.Errorf("the CRM holds %d records, want the 6 that existed, 4 opportunities and 8 follow-ups created", got)
	}
	for enq := range existing {
		if c := w.crm.CountByRef(opKey(enq)); c != 1 {
			t.Errorf("%s is in the CRM %d times", enq, c)
		}
	}
	if calls := w.count(`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id
		WHERE a.business_key LIKE 'enq-had-%' AND t.kind = 'call' AND a.name = 'open_opportunity'`); calls != 0 {
		t.Errorf("%d create calls for opportunities whose records existed", calls)
	}
	if n := len(w.mail.Messages()); n != 1 {
		t.Errorf("%d welcome mails sent, want only the one after the window's start", n)
	}
}
