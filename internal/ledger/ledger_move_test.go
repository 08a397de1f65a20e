package ledger_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/accounts"
	"github.com/oncehook/oncehook/internal/cutover"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/settings"
)

// TestLedgerMovesBetweenInstances: a client's ledger exported from one oncehook
// (with its events' bodies) and imported into a fresh one, which has its own CRM
// and mail sink. There, the providers' redeliveries and a replay of every event
// perform nothing already performed; the owner a person assigned and a note
// arrived; a new event is performed as usual; the same file again adds nothing,
// and a file that conflicts loads nothing.
func TestLedgerMovesBetweenInstances(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	old := newWorld(t, worldOptions{lookup: "strong"})
	const n = 5
	for i := range n {
		old.deliver(checkout{eventID: fmt.Sprintf("evt_m_%d", i), enquiry: fmt.Sprintf("enq-m-%d", i), amount: 10 + i})
	}
	for i := range n {
		old.waitFor("send_welcome_email", fmt.Sprintf("enq-m-%d", i), ledger.StateConfirmed)
	}
	first := old.waitFor("open_opportunity", "enq-m-0", ledger.StateConfirmed)
	if status, out := old.api(old.token, "POST", "/actions/"+first.ID+"/note", map[string]any{"note": "called the customer"}); status != 200 {
		t.Fatalf("note: %d %v", status, out)
	}
	if _, err := accounts.CreateUser(ctx, old.pool, "bea@example.com", settings.RoleOperator, "a long password 1", "acme"); err != nil {
		t.Fatal(err)
	}
	if status, out := old.api(old.admin, "POST", "/actions/"+first.ID+"/assign", map[string]any{"owner": "bea@example.com"}); status != 200 {
		t.Fatalf("assign: %d %v", status, out)
	}
	// A snooze goes with it (written as the act writes it: a confirmed action
	// cannot be snoozed from its page).
	old.exec(`INSERT INTO snoozes (client, action_id, until, snoozed_by) VALUES ('acme', $1, now() + interval '1 day', 'bea@example.com')`, first.ID)
	var file bytes.Buffer
	rep, err := cutover.Export(ctx, db.New(old.pool), old.cfg, "acme", true, &file)
	if err != nil || rep.Actions != 2*n || rep.Events != n {
		t.Fatalf("export: %+v %v", rep, err)
	}

	fresh := newWorld(t, worldOptions{lookup: "strong"})
	p := cutover.LedgerParams{Pool: fresh.pool, Config: fresh.cfg, File: "acme.ledger"}
	dry := p
	dry.DryRun = true
	if got, err := cutover.ImportLedger(ctx, dry, bytes.NewReader(file.Bytes())); err != nil || got.Actions != 2*n ||
		fresh.count(`SELECT count(*) FROM actions`) != 0 {
		t.Fatalf("dry run: %+v %v, %d actions", got, err, fresh.count(`SELECT count(*) FROM actions`))
	}
	got, err := cutover.ImportLedger(ctx, p, bytes.NewReader(file.Bytes()))
	if err != nil || got.Actions != 2*n || got.Events != n || got.Links != 2*n || got.Audit == 0 || got.Snoozes != 1 {
		t.Fatalf("import: %+v %v", got, err)
	}
	again, err := cutover.ImportLedger(ctx, p, bytes.NewReader(file.Bytes()))
	if err != nil || again.Actions != 0 || again.ActionsAlready != 2*n || again.Events != 0 || again.Audit != 0 {
		t.Errorf("the same file again: %+v %v", again, err)
	}

	// The providers redeliver, and a person replays every event: nothing is
	// performed again.
	for i := range n {
		fresh.deliver(checkout{eventID: fmt.Sprintf("evt_m_%d", i), enquiry: fmt.Sprintf("enq-m-%d", i), amount: 10 + i})
	}
	if status, out := fresh.api(fresh.admin, "POST", "/events/replay?source=stripe-live", map[string]any{"note": "after the move", "expected": n}); status != http.StatusAccepted {
		t.Fatalf("replay: %d %v", status, out)
	}
	fresh.deliver(checkout{eventID: "evt_m_new", enquiry: "enq-m-new", amount: 99})
	fresh.waitFor("send_welcome_email", "enq-m-new", ledger.StateConfirmed)
	deadline := time.Now().Add(20 * time.Second)
	for fresh.count(`SELECT count(*) FROM events WHERE status = 'received'`) > 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if replayed := fresh.count(`SELECT count(*) FROM event_audit WHERE act = 'replay'`); replayed != n {
		t.Errorf("%d events were replayed, want %d", replayed, n)
	}
	if routed := fresh.count(`SELECT count(*) FROM events WHERE status = 'routed' AND source_event_id LIKE 'evt_m_%'`); routed != n+1 {
		t.Errorf("%d events routed, want the %d moved and replayed and the new one", routed, n+1)
	}
	if c := fresh.crm.Len(); c != 1 {
		t.Errorf("the new instance's CRM holds %d records, want only the new event's", c)
	}
	if m := len(fresh.mail.Messages()); m != 1 {
		t.Errorf("the new instance sent %d mails, want only the new event's", m)
	}
	if calls := fresh.count(`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id
		WHERE a.business_key <> 'enq-m-new'`); calls != 0 {
		t.Errorf("%d calls for operations performed on the old instance", calls)
	}
	moved := fresh.waitFor("open_opportunity", "enq-m-0", ledger.StateConfirmed)
	if moved.Owner != "bea@example.com" || moved.ExternalRef != first.ExternalRef {
		t.Errorf("the moved action: owner %q, record %q; want bea@example.com and %q", moved.Owner, moved.ExternalRef, first.ExternalRef)
	}
	if notes := fresh.count(`SELECT count(*) FROM audit WHERE act = 'note' AND note = 'called the customer'`); notes != 1 {
		t.Errorf("%d notes arrived, want 1", notes)
	}
	if z := fresh.count(`SELECT count(*) FROM snoozes z JOIN actions a ON a.client = z.client AND a.id = z.action_id
		WHERE a.business_key = 'enq-m-0' AND a.name = 'open_opportunity' AND z.snoozed_by = 'bea@example.com'`); z != 1 {
		t.Errorf("%d snoozes arrived, want 1", z)
	}

	// A ledger that conflicts with what the new instance did since loads nothing.
	fresh.exec(`UPDATE actions SET external_ref = 'opp_other' WHERE business_key = 'enq-m-1' AND name = 'open_opportunity'`)
	before := fresh.count(`SELECT count(*) FROM audit`)
	_, err = cutover.ImportLedger(ctx, p, bytes.NewReader(file.Bytes()))
	var problems *cutover.Problems
	if !errors.As(err, &problems) || !strings.Contains(err.Error(), `with record "opp_other"; the file says confirmed with record`) {
		t.Errorf("a conflicting ledger: %v", err)
	}
	if after := fresh.count(`SELECT count(*) FROM audit`); after != before {
		t.Errorf("the conflicting ledger wrote %d audit entries", after-before)
	}
}
