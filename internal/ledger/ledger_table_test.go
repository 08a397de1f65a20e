package ledger_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// One test per row of the decision table (docs/how-it-works.md, "States and the decision table"), each checking what
// the destination actually holds. The crash rows are in ledger_crash_test.go.

func TestDecision2xxConfirmed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.deliver(checkout{eventID: "evt_ok", enquiry: "enq_ok"})
	a := w.waitFor("open_opportunity", "enq_ok", "confirmed")
	attempts := w.detail(a.ID)["attempts"].([]any)
	last := attempts[len(attempts)-1].(map[string]any)
	if last["http_status"] != float64(201) || last["evidence"] != a.ExternalRef || a.ExternalRef == "" {
		t.Errorf("attempt %v; want the response status and the record id %q kept", last, a.ExternalRef)
	}
	if n := len(w.crm.Records()); n != 1 {
		t.Errorf("CRM holds %d records, want 1", n)
	}
}

func TestDecisionAlreadyConfirmedRunsOnlyLaterSteps(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.mail.FailNext(550, "mailbox unavailable")
	w.deliver(checkout{eventID: "evt_s1", enquiry: "enq_s"})
	opp := w.waitFor("open_opportunity", "enq_s", "confirmed")
	email := w.waitFor("send_welcome_email", "enq_s", "failed")
	requestsBefore := len(w.crm.Requests())

	// A retry of the failed email step performs only the email.
	if status, out := w.api(w.token, "POST", "/actions/"+email.ID+"/retry", map[string]any{"note": "mailbox fixed", "checked_destination": true}); status != 200 {
		t.Fatalf("retry: %d %v", status, out)
	}
	w.waitFor("send_welcome_email", "enq_s", "confirmed")
	if n := len(w.crm.Requests()); n != requestsBefore {
		t.Errorf("the CRM got %d more requests; the confirmed step must not run again", n-requestsBefore)
	}
	// A later event for the same operation links to the confirmed action.
	w.waitEvent(w.deliver(checkout{eventID: "evt_s2", enquiry: "enq_s"})["event_id"].(string))
	if a := w.actions("open_opportunity"); len(a) != 1 || a[0].State != "confirmed" || a[0].ExternalRef != opp.ExternalRef {
		t.Errorf("actions %+v; want the one confirmed action", a)
	}
	if n, m := len(w.crm.Records()), len(w.mail.Messages()); n != 1 || m != 1 {
		t.Errorf("CRM %d records, mail %d messages; want 1 and 1", n, m)
	}
}

func TestDecisionRejectedFailsThenManualRetry(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be positive"})
	w.deliver(checkout{eventID: "evt_422", enquiry: "enq_422"})
	a := w.waitFor("open_opportunity", "enq_422", "failed")
	if !strings.Contains(a.Reason, "amount must be positive") {
		t.Errorf("reason %q lacks the provider's reason", a.Reason)
	}
	if n := len(w.crm.Records()); n != 0 {
		t.Fatalf("CRM holds %d records after a 422", n)
	}
	if status, out := w.api(w.token, "POST", "/actions/"+a.ID+"/retry", map[string]any{"note": "fixed the amount rule"}); status != 200 {
		t.Fatalf("manual retry: %d %v", status, out)
	}
	b := w.waitFor("open_opportunity", "enq_422", "confirmed")
	reqs := w.crm.Requests()
	var keys []string
	for _, r := range reqs {
		if r.Method == "POST" {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	if len(keys) != 2 || keys[0] != a.OperationKey || keys[1] != a.OperationKey || b.OperationKey != a.OperationKey {
		t.Errorf("POST keys %v; want the original key %s twice", keys, a.OperationKey)
	}
	if n := len(w.crm.Records()); n != 1 {
		t.Errorf("CRM holds %d records, want 1", n)
	}
	audit := w.detail(a.ID)["audit"].([]any)
	if len(audit) == 0 || audit[len(audit)-1].(map[string]any)["act"] != "retry" {
		t.Errorf("audit %v lacks the retry", audit)
	}
}

func TestDecisionUnauthorizedHoldsDestination(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.SetToken("rotated-token")
	w.deliver(checkout{eventID: "evt_401", enquiry: "enq_401"})
	w.waitFor("open_opportunity", "enq_401", "held")
	w.waitEvent(w.deliver(checkout{eventID: "evt_401b", enquiry: "enq_401b"})["event_id"].(string))
	w.waitFor("open_opportunity", "enq_401b", "held")
	posts := 0
	for _, r := range w.crm.Requests() {
		if r.Method == "POST" {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("%d POSTs reached the CRM; after a 401 no further calls", posts)
	}
	_, dests := w.api(w.token, "GET", "/destinations", nil)
	crm := dests["destinations"].([]any)[0].(map[string]any)
	if crm["status"] != "disconnected" || crm["held"] != float64(2) || crm["owner"] != "crm-admin@example.com" {
		t.Errorf("destination %v; want disconnected with 2 held and its owner", crm)
	}
	if status, _ := w.api(w.token, "POST", "/destinations/crm/reconnect", nil); status != 403 {
		t.Errorf("operator reconnect: %d, want 403", status)
	}
	if status, out := w.api(w.admin, "POST", "/destinations/crm/reconnect", nil); status != 409 {
		t.Errorf("reconnect while still refused: %d %v, want 409", status, out)
	}
	w.crm.SetToken(crmToken)
	if status, out := w.api(w.admin, "POST", "/destinations/crm/reconnect", nil); status != 200 {
		t.Fatalf("reconnect: %d %v", status, out)
	}
	w.waitFor("open_opportunity", "enq_401", "confirmed")
	w.waitFor("open_opportunity", "enq_401b", "confirmed")
	if n := len(w.crm.Records()); n != 2 {
		t.Errorf("CRM holds %d records, want 2", n)
	}
}

func TestDecisionInFlightRetries(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.Fail(sandbox.Fault{Status: 409})
	w.deliver(checkout{eventID: "evt_409", enquiry: "enq_409"})
	a := w.waitFor("open_opportunity", "enq_409", "confirmed")
	if a.Attempts != 2 || len(w.crm.Records()) != 1 {
		t.Errorf("attempts %d, records %d; want 2 and 1", a.Attempts, len(w.crm.Records()))
	}
}

func TestDecisionThrottledHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.Fail(sandbox.Fault{Status: 429, RetryAfter: "1"})
	w.deliver(checkout{eventID: "evt_429", enquiry: "enq_429"})
	r := w.waitFor("open_opportunity", "enq_429", "retrying")
	if r.Attempts != 1 {
		t.Errorf("attempts %d while retrying", r.Attempts)
	}
	a := w.waitFor("open_opportunity", "enq_429", "confirmed")
	attempts := w.detail(a.ID)["attempts"].([]any)
	if len(attempts) != 2 {
		t.Fatalf("attempts %v, want 2", attempts)
	}
	first, _ := time.Parse(time.RFC3339Nano, attempts[0].(map[string]any)["finished_at"].(string))
	second, _ := time.Parse(time.RFC3339Nano, attempts[1].(map[string]any)["started_at"].(string))
	if gap := second.Sub(first); gap < 900*time.Millisecond {
		t.Errorf("retried after %s, before Retry-After: 1", gap)
	}
	if n := len(w.crm.Records()); n != 1 {
		t.Errorf("CRM holds %d records, want 1", n)
	}
}

func TestDecisionNotSentRetries(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.Fail(sandbox.Fault{Status: 503, RetryAfter: "0"})
	w.deliver(checkout{eventID: "evt_503", enquiry: "enq_503"})
	a := w.waitFor("open_opportunity", "enq_503", "confirmed")
	if a.Attempts != 2 || len(w.crm.Records()) != 1 {
		t.Errorf("attempts %d, records %d; want 2 and 1", a.Attempts, len(w.crm.Records()))
	}
}

func TestDecisionTimeoutAfterCommitReconciledByLookup(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong"})
	w.crm.Fail(sandbox.Fault{AfterCommit: true, Delay: 4 * time.Second}) // past the 2s timeout
	w.deliver(checkout{eventID: "evt_to", enquiry: "enq_to"})
	a := w.waitFor("open_opportunity", "enq_to", "confirmed")
	recs := w.crm.Records()
	if len(recs) != 1 || a.ExternalRef != recs[0].ID {
		t.Fatalf("records %+v, action ref %q; want one record found by lookup", recs, a.ExternalRef)
	}
	if a.Attempts != 1 {
		t.Errorf("attempts %d; the lookup must confirm it without a second call", a.Attempts)
	}
	found := false
	for _, at := range w.detail(a.ID)["attempts"].([]any) {
		m := at.(map[string]any)
		found = found || (m["kind"] == "lookup" && strings.Contains(m["observed"].(string), "found"))
	}
	if !found {
		t.Errorf("no lookup attempt recorded how it was found")
	}
}

func TestDecision5xxBeforeCommitStrongLookupAbsentRetriesSameKey(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong"})
	w.crm.Fail(sandbox.Fault{Status: 500})
	w.deliver(checkout{eventID: "evt_500", enquiry: "enq_500"})
	a := w.waitFor("open_opportunity", "enq_500", "confirmed")
	var keys []string
	for _, r := range w.crm.Requests() {
		if r.Method == "POST" {
			keys = append(keys, r.IdempotencyKey)
		}
	}
	if len(keys) != 2 || keys[0] != keys[1] || keys[0] != a.OperationKey {
		t.Errorf("POST keys %v; want the same key twice", keys)
	}
	if n := len(w.crm.Records()); n != 1 {
		t.Errorf("CRM holds %d records, want 1", n)
	}
}

func TestDecisionNoLookupKeyRemembered(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.Fail(sandbox.Fault{AfterCommit: true, Status: 502})
	w.deliver(checkout{eventID: "evt_502", enquiry: "enq_502"})
	a := w.waitFor("open_opportunity", "enq_502", "confirmed")
	if n := len(w.crm.Records()); n != 1 {
		t.Errorf("CRM holds %d records; the remembered key must prevent a second", n)
	}
	if a.Attempts != 2 {
		t.Errorf("attempts %d, want 2 (the retry relied on the key)", a.Attempts)
	}
}

func TestDecisionEventualLookupAbsentFails(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "eventual"})
	w.crm.Fail(sandbox.Fault{Status: 500})
	w.deliver(checkout{eventID: "evt_ev", enquiry: "enq_ev"})
	a := w.waitFor("open_opportunity", "enq_ev", "failed")
	if !strings.Contains(a.Reason, "outcome unknown") {
		t.Errorf("reason %q, want outcome unknown", a.Reason)
	}
	if a.Attempts != 1 || len(w.crm.Records()) != 0 {
		t.Errorf("attempts %d, records %d; never a blind repeat", a.Attempts, len(w.crm.Records()))
	}
}

func TestDecisionSMTPUnsureGoesToPerson(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	hang := make(chan struct{})
	defer close(hang)
	w.mail.HangNext(hang)
	w.deliver(checkout{eventID: "evt_mail", enquiry: "enq_mail"})
	a := w.waitFor("send_welcome_email", "enq_mail", "failed")
	if !strings.Contains(a.Reason, "outcome unknown") || a.Attempts != 1 {
		t.Errorf("reason %q after %d attempts; want outcome unknown after one", a.Reason, a.Attempts)
	}
	if n := len(w.mail.Messages()); n > 1 {
		t.Errorf("%d messages; an unsure send is never repeated blindly", n)
	}
	// The retry guard: SMTP has no lookup and no key memory.
	status, out := w.api(w.token, "POST", "/actions/"+a.ID+"/retry", map[string]any{})
	if status != 409 || !strings.Contains(out["error"].(string), "Check the destination") {
		t.Errorf("unguarded retry: %d %v; want 409 with the reason", status, out)
	}
}

func TestDecisionBudgetSpentNamesOwner(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	for range 4 {
		w.crm.Fail(sandbox.Fault{Status: 503, RetryAfter: "0"})
	}
	w.deliver(checkout{eventID: "evt_budget", enquiry: "enq_budget"})
	a := w.waitFor("open_opportunity", "enq_budget", "failed")
	if a.Attempts != 4 || !strings.Contains(a.Reason, "sales-ops@example.com") || !strings.Contains(a.Reason, "4 attempts") {
		t.Errorf("attempts %d, reason %q; want 4 attempts and the owner named", a.Attempts, a.Reason)
	}
	if n := len(w.crm.Records()); n != 0 {
		t.Errorf("CRM holds %d records", n)
	}
}

func TestDecisionLeaseExpiredWithoutAttemptIsPending(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	w.deliver(checkout{eventID: "evt_lease", enquiry: "enq_lease"})
	// A worker that claimed the action and died before writing an attempt: route the
	// event, then claim by hand with a lease already expired.
	w.route()
	w.waitFor("open_opportunity", "enq_lease", "pending")
	if _, err := w.pool.Exec(context.Background(), `UPDATE actions SET state='processing', claimed_from='pending',
		lease_owner='dead-worker', lease_expires_at=now() - interval '1 second' WHERE name='open_opportunity'`); err != nil {
		t.Fatal(err)
	}
	w.startEngine(0)
	a := w.waitFor("open_opportunity", "enq_lease", "confirmed")
	if a.Attempts != 1 || len(w.crm.Records()) != 1 {
		t.Errorf("attempts %d, records %d; want 1 and 1", a.Attempts, len(w.crm.Records()))
	}
}

func TestReplayAfterDestinationForgotKey(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	w.deliver(checkout{eventID: "evt_forgot", enquiry: "enq_forgot"})
	w.route()
	// An attempt 25 hours ago whose outcome was never learned; the CRM's key memory
	// (24h) has passed and it has no lookup.
	if _, err := w.pool.Exec(context.Background(), `UPDATE actions SET state = 'uncertain', attempts = 1,
		first_attempt_at = now() - interval '25 hours' WHERE name = 'open_opportunity'`); err != nil {
		t.Fatal(err)
	}
	w.crm.ForgetKeys()
	w.startEngine(0)
	a := w.waitFor("open_opportunity", "enq_forgot", "failed")
	if !strings.Contains(a.Reason, "outcome unknown") || a.Attempts != 1 {
		t.Errorf("reason %q after %d attempts; want outcome unknown, no new call", a.Reason, a.Attempts)
	}
	if n := len(w.crm.Requests()); n != 0 {
		t.Fatalf("%d requests reached the CRM; never a blind repeat", n)
	}
	status, out := w.api(w.token, "POST", "/actions/"+a.ID+"/retry", map[string]any{"note": "looks fine"})
	if status != 409 || !strings.Contains(out["error"].(string), "key memory") {
		t.Fatalf("retry without checking: %d %v; want 409 naming the key memory", status, out)
	}
	status, _ = w.api(w.token, "POST", "/actions/"+a.ID+"/retry", map[string]any{"checked_destination": true})
	if status != 409 {
		t.Fatalf("retry checked but without a note: %d; want 409", status)
	}
	status, out = w.api(w.token, "POST", "/actions/"+a.ID+"/retry",
		map[string]any{"checked_destination": true, "note": "searched the CRM for enq_forgot: absent"})
	if status != 200 {
		t.Fatalf("checked retry: %d %v", status, out)
	}
	w.waitFor("open_opportunity", "enq_forgot", "confirmed")
	if n := len(w.crm.Records()); n != 1 {
		t.Errorf("CRM holds %d records, want 1", n)
	}
	var checked bool
	for _, e := range w.detail(a.ID)["audit"].([]any) {
		m := e.(map[string]any)
		if m["act"] == "retry" {
			checked = m["detail"].(map[string]any)["checked_destination"] == true
		}
	}
	if !checked {
		t.Errorf("the audit trail does not keep the confirmation that the destination was checked")
	}
}

// TestUnstorableReplyStillConfirms: a CRM whose reply carries a NUL in the record id
// and a \u0000 escape (which jsonb refuses), or a lone UTF-16 surrogate escape (which
// jsonb refuses too), still had its effect, so the action is confirmed with what can
// be kept, and the other calls recorded with it in the same group are not held up.
func TestUnstorableReplyStillConfirms(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{crmWrap: func(crm http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			nul, surrogate := bytes.Contains(body, []byte("enq_nul")), bytes.Contains(body, []byte("enq_sur"))
			if r.Method != http.MethodPost || !nul && !surrogate {
				crm.ServeHTTP(rw, r)
				return
			}
			rec := httptest.NewRecorder()
			crm.ServeHTTP(rec, r)
			var reply map[string]any
			if err := json.Unmarshal(rec.Body.Bytes(), &reply); err != nil {
				t.Errorf("CRM reply: %v", err)
			}
			if nul {
				reply["id"] = fmt.Sprint(reply["id"]) + "\x00nul"
				reply["note"] = "\x00"
			} else {
				reply["note"] = "SURROGATE"
			}
			out, _ := json.Marshal(reply) // encodes the NULs as \u0000
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(rec.Code)
			_, _ = rw.Write(bytes.ReplaceAll(out, []byte("SURROGATE"), []byte(`\ud800`))) // as JavaScript writes a broken string
		})
	}})
	enquiries := []string{"enq_a", "enq_nul", "enq_b", "enq_sur", "enq_c"}
	var wg sync.WaitGroup
	for _, enq := range enquiries {
		wg.Add(1)
		go func() { defer wg.Done(); w.deliver(checkout{eventID: "evt_" + enq, enquiry: enq}) }()
	}
	wg.Wait()
	for _, enq := range enquiries {
		a := w.waitFor("open_opportunity", enq, "confirmed")
		if a.ExternalRef == "" || strings.Contains(a.ExternalRef, "\x00") {
			t.Errorf("%s: external ref %q; want the record id, without the NUL", enq, a.ExternalRef)
		}
		if enq == "enq_nul" && !strings.HasSuffix(a.ExternalRef, "nul") {
			t.Errorf("%s: external ref %q; want the CRM's id with the NUL dropped", enq, a.ExternalRef)
		}
	}
	if n := len(w.crm.Records()); n != len(enquiries) {
		t.Errorf("CRM holds %d records, want %d: one call per operation", n, len(enquiries))
	}
	var note string
	if err := w.pool.QueryRow(context.Background(), `SELECT coalesce(result->>'note', '') FROM actions
		WHERE name = 'open_opportunity' AND business_key = 'enq_sur'`).Scan(&note); err != nil {
		t.Fatal(err)
	}
	if note != "\uFFFD" {
		t.Errorf("the reply with a lone surrogate was kept as %q; want the rest of it, the surrogate replaced", note)
	}
	if n := w.count(`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id
		WHERE a.name = 'open_opportunity' AND t.kind = 'call'`); n != len(enquiries) {
		t.Errorf("%d call attempts, want %d", n, len(enquiries))
	}
}

// TestRecordingNeedsTheClaimsOwnToken: a worker whose outcome statement is retried
// after its reply was lost (the statement had committed) must not record that old
// outcome over a newer claim of the same action by the same worker: each claim has a
// token, and recording and lease renewal need the claim's own.
func TestRecordingNeedsTheClaimsOwnToken(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	w.deliver(checkout{eventID: "evt_tok", enquiry: "enq_tok"})
	w.route()
	ctx := context.Background()
	q := db.New(w.pool)
	claim := func() db.ActionClaimRow {
		t.Helper()
		rows, err := q.ActionClaim(ctx, db.ActionClaimParams{Client: "acme", MaxActions: 1, Worker: "w1", LeaseSeconds: 60,
			Callable: []string{"crm"}, FillNames: []string{}, Sharded: dbtest.OnCitus()})
		if err != nil || len(rows) != 1 {
			t.Fatalf("claim: %v %v", rows, err)
		}
		return rows[0]
	}
	record := func(c db.ActionClaimRow, token int64) int {
		t.Helper()
		rows, err := q.ActionRecordBatch(ctx, db.ActionRecordBatchParams{Worker: "w1",
			Clients: []string{c.Client}, Ids: []int64{c.ID}, AttemptIds: []int64{c.AttemptID},
			Observed: []string{"5xx"}, HttpStatuses: []int32{503}, Errors: []string{"busy"},
			States: []string{ledger.StateRetrying}, Reasons: []string{"503"}, NextAttemptAts: []time.Time{time.Now().Add(-time.Second)},
			ExternalRefs: []string{""}, Results: []string{""}, Owners: []string{""}, LeaseTokens: []int64{token}, AttemptsBack: []int32{0},
			Sharded: dbtest.OnCitus(), Client: c.Client})
		if err != nil {
			t.Fatal(err)
		}
		return len(rows)
	}
	first := claim()
	if n := record(first, first.LeaseToken); n != 1 {
		t.Fatalf("the claim's own outcome: %d recorded, want 1", n)
	}
	second := claim() // the same worker claims the action again
	if second.ID != first.ID || second.LeaseToken == first.LeaseToken {
		t.Fatalf("second claim %d token %d; want action %d with a new token (was %d)", second.ID, second.LeaseToken, first.ID, first.LeaseToken)
	}
	if n := record(first, first.LeaseToken); n != 0 { // the retried statement of the first claim
		t.Errorf("the first claim's outcome, replayed: %d recorded, want 0", n)
	}
	if state := w.count(`SELECT count(*) FROM actions WHERE id = $1 AND state = 'processing' AND lease_owner = 'w1'`, first.ID); state != 1 {
		t.Errorf("the second claim lost its lease to the replay")
	}
	for token, want := range map[int64]int64{first.LeaseToken: 0, second.LeaseToken: 1} {
		n, err := q.ActionRenewLease(ctx, db.ActionRenewLeaseParams{Client: first.Client, ID: first.ID,
			Worker: ptr("w1"), LeaseSeconds: 60, LeaseToken: token})
		if err != nil || n != want {
			t.Errorf("renew with token %d: %d renewed (%v), want %d", token, n, err, want)
		}
	}
}

func ptr[T any](v T) *T { return &v }

// TestHeldAfterReconnectIsReleased: a router that read the destination as
// disconnected creates its action held; if its transaction commits only after an
// admin's reconnect released the held actions, recovery releases this one too, and
// it is performed once.
func TestHeldAfterReconnectIsReleased(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.SetToken("rotated-token")
	w.deliver(checkout{eventID: "evt_hr", enquiry: "enq_hr"})
	w.waitFor("open_opportunity", "enq_hr", "held")
	// The reconnect lands between the router's read and its commit: the destination
	// is connected, the action it created stays held.
	w.crm.SetToken(crmToken)
	w.exec(`UPDATE destinations SET status = 'connected' WHERE name = 'crm'`)
	a := w.waitFor("open_opportunity", "enq_hr", "confirmed")
	if n := w.crm.CountByRef(a.OperationKey); n != 1 {
		t.Errorf("the CRM holds %d records for the key, want 1", n)
	}
}

// TestRefusalFromBeforeAReconnectIsStale: a call made with the old credentials
// is refused only after an admin reconnected its destination. The refusal holds
// that action alone; the destination stays connected, and the action is released
// and performed once.
func TestRefusalFromBeforeAReconnectIsStale(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	reached, hang := make(chan struct{}), make(chan struct{})
	w.crm.Fail(sandbox.Fault{Status: http.StatusUnauthorized, Hang: hang, Reached: reached})
	w.deliver(checkout{eventID: "evt_stale", enquiry: "enq_stale"})
	select {
	case <-reached:
	case <-time.After(20 * time.Second):
		t.Fatal("the call never reached the CRM")
	}
	w.exec(`INSERT INTO destinations (name, status, reason, changed_at) VALUES ('crm', 'connected', 'reconnected by an admin', now())
		ON CONFLICT (name) DO UPDATE SET status = EXCLUDED.status, reason = EXCLUDED.reason, changed_at = EXCLUDED.changed_at`)
	close(hang)
	a := w.waitFor("open_opportunity", "enq_stale", "confirmed")
	if n := w.crm.CountByRef(a.OperationKey); n != 1 {
		t.Errorf("the CRM holds %d records for the key, want 1", n)
	}
	if n := w.count(`SELECT count(*) FROM destinations WHERE name = 'crm' AND status = 'connected'`); n != 1 {
		t.Errorf("the stale refusal disconnected the CRM again")
	}
}

// TestRecoveryHoldsWhatADisconnectRaced: an action created while its destination
// was being disconnected (the router's transaction read it as connected and
// committed after the disconnect had held the others) waits pending where no
// claim takes it; recovery holds it with the others, so that it shows among the
// held and a reconnect releases it.
func TestRecoveryHoldsWhatADisconnectRaced(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	w.deliver(checkout{eventID: "evt_raced", enquiry: "enq_raced"})
	w.route()
	w.exec(`INSERT INTO destinations (name, status, reason, changed_at) VALUES ('crm', 'disconnected', 'credentials refused', now())
		ON CONFLICT (name) DO UPDATE SET status = 'disconnected', reason = 'credentials refused'`)
	eng := engine.New(engine.Params{Pool: w.pool, Config: w.cfg, Clients: destination.NewClients(w.cfg)})
	if _, err := eng.RecoverLeases(context.Background()); err != nil {
		t.Fatal(err)
	}
	a := w.waitFor("open_opportunity", "enq_raced", ledger.StateHeld)
	if a.Reason != "destination crm is disconnected" {
		t.Errorf("held with reason %q, want the disconnect's", a.Reason)
	}
}

// TestLeaseRecoveryFollowsTheTable lets three claims lapse at once, one of each kind,
// and checks that recovery writes what the decision table says (TestDecide pins
// the table): a retry that never called anyone is pending, a started call and a
// reconcile are uncertain.
func TestLeaseRecoveryFollowsTheTable(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true})
	for _, id := range []string{"retry", "call", "look"} {
		w.deliver(checkout{eventID: "evt_" + id, enquiry: "enq_" + id})
	}
	w.route()
	lapse := func(enquiry, from string) {
		w.exec(`UPDATE actions SET state = 'processing', claimed_from = $2, lease_owner = 'dead-worker',
			lease_expires_at = now() - interval '1 second' WHERE name = 'open_opportunity' AND business_key LIKE '%' || $1`, enquiry, from)
	}
	lapse("enq_retry", "retrying")
	lapse("enq_call", "pending")
	lapse("enq_look", "uncertain")
	w.exec(`INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
		SELECT client, id, 'call', operation_key, 'dead-worker', rows_day FROM actions
		WHERE name = 'open_opportunity' AND business_key LIKE '%enq_call'`)
	eng := engine.New(engine.Params{Pool: w.pool, Config: w.cfg, Clients: destination.NewClients(w.cfg)})
	n, err := eng.RecoverLeases(context.Background())
	if err != nil || n != 3 {
		t.Fatalf("recovered %d leases (%v), want 3", n, err)
	}
	type recovered struct{ State, Reason string }
	got := map[string]recovered{}
	for _, a := range w.actions("open_opportunity") {
		got[a.BusinessKey[strings.LastIndex(a.BusinessKey, "enq_"):]] = recovered{a.State, a.Reason}
	}
	want := map[string]recovered{
		"enq_retry": {"pending", "lease expired, no attempt started: worker dead-worker stopped before calling anyone; safe to run"},
		"enq_call":  {"uncertain", "lease expired, attempt started but unrecorded: worker dead-worker stopped after starting the call; reconcile before any repeat"},
		"enq_look":  {"uncertain", "lease expired during a reconcile: worker dead-worker stopped while reconciling; reconcile again"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after recovery (-want +got):\n%s", diff)
	}
	if n := w.count(`SELECT count(*) FROM attempts WHERE status = 'abandoned'`); n != 1 {
		t.Errorf("%d abandoned attempts, want the started call's 1", n)
	}
}
