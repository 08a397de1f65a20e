package ledger_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/oncehook/oncehook/internal/sandbox"
)

// TestCorrectionGuard: a rejected request is corrected through the JSON API;
// under the default rule (another_person) the person who proposed it cannot
// approve it, another admin can, and only then is it performed, once, with the
// corrected params under a new attempt identity (the CRM remembers keys). Under
// corrections: {approve: self} the proposer may approve their own.
func TestCorrectionGuard(t *testing.T) {
	t.Parallel()
	for _, rule := range []string{"another_person", "self"} {
		t.Run(rule, func(t *testing.T) {
			t.Parallel()
			o := worldOptions{}
			if rule == "self" {
				o.crmExtra = "    corrections: {approve: self}"
			}
			w := newWorld(t, o)
			proposer := w.newToken("proposer", "admin")
			other := w.newToken("other", "admin")

			// Only a rejected request can be corrected.
			w.deliver(checkout{eventID: "evt_ok_" + rule, enquiry: "enq-ok", amount: 100})
			ok := w.waitFor("open_opportunity", "enq-ok", "confirmed")
			if status, out := w.api(proposer, "POST", "/actions/"+ok.ID+"/correct",
				map[string]any{"params": map[string]any{"amount": 1}}); status != 409 {
				t.Errorf("correcting a confirmed action: %d %v", status, out)
			}

			w.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
			w.deliver(checkout{eventID: "evt_fix_" + rule, enquiry: "enq-fix", amount: 4200})
			a := w.waitFor("open_opportunity", "enq-fix", "failed")
			before := w.crm.Len()
			status, out := w.api(proposer, "POST", "/actions/"+a.ID+"/correct", map[string]any{
				"params": map[string]any{"enquiry_id": "enq-fix", "amount": 4000}, "note": "approved amount"})
			if status != 200 {
				t.Fatalf("correct: %d %v", status, out)
			}
			if status, _ := w.api(proposer, "POST", "/actions/"+a.ID+"/correct", map[string]any{
				"params": map[string]any{"enquiry_id": "enq-fix", "amount": 1}}); status != 409 {
				t.Errorf("a second correction while one waits: %d", status)
			}
			if got := w.detail(a.ID)["state"]; got != "failed" {
				t.Fatalf("after proposing, the action is %v: nothing may happen before approval", got)
			}
			approver := other
			if rule == "another_person" {
				status, out := w.api(proposer, "POST", "/actions/"+a.ID+"/approve-correction", nil)
				if status != 403 || !strings.Contains(fmt.Sprint(out), "another person") {
					t.Fatalf("self-approval under another_person: %d %v", status, out)
				}
				// The proposer may withdraw it; the action stays failed and can be corrected again.
				if status, out := w.api(proposer, "POST", "/actions/"+a.ID+"/refuse-correction", nil); status != 200 {
					t.Fatalf("refusing one's own correction: %d %v", status, out)
				}
				if got := w.detail(a.ID)["state"]; got != "failed" {
					t.Fatalf("after a refusal the action is %v", got)
				}
				if status, out := w.api(proposer, "POST", "/actions/"+a.ID+"/correct", map[string]any{
					"params": map[string]any{"enquiry_id": "enq-fix", "amount": 4000}, "note": "approved amount"}); status != 200 {
					t.Fatalf("correct again: %d %v", status, out)
				}
			} else {
				approver = proposer
			}
			if w.crm.Len() != before {
				t.Fatalf("the CRM was called before the correction was approved")
			}
			if status, out := w.api(approver, "POST", "/actions/"+a.ID+"/approve-correction",
				map[string]any{"note": "checked"}); status != 200 {
				t.Fatalf("approve: %d %v", status, out)
			}
			w.waitFor("open_opportunity", "enq-fix", "confirmed")

			d := w.detail(a.ID)
			cs := d["corrections"].([]any)
			c := cs[len(cs)-1].(map[string]any)
			key, _ := c["attempt_key"].(string)
			if c["state"] != "approved" || c["proposed_by"] != "token:proposer" || key == "" || key == a.OperationKey {
				t.Errorf("the correction recorded: %v", c)
			}
			recs := 0
			for _, r := range w.crm.Records() {
				if r.Fields["enquiry_id"] == "enq-fix" {
					recs++
					if fmt.Sprint(r.Fields["amount"]) != "4000" || r.IdempotencyKey != key || r.Fields["source_ref"] != key {
						t.Errorf("the CRM stored %+v, want amount 4000 under the attempt key %s", r, key)
					}
				}
			}
			if recs != 1 {
				t.Errorf("the CRM holds %d records for enq-fix, want 1", recs)
			}
			// Another act on a failed action closes the correction waiting on it.
			w.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be approved"})
			w.deliver(checkout{eventID: "evt_sup_" + rule, enquiry: "enq-sup", amount: 1})
			sup := w.waitFor("open_opportunity", "enq-sup", "failed")
			if status, out := w.api(proposer, "POST", "/actions/"+sup.ID+"/correct", map[string]any{
				"params": map[string]any{"enquiry_id": "enq-sup", "amount": 2}}); status != 200 {
				t.Fatalf("correct: %d %v", status, out)
			}
			if status, out := w.api(other, "POST", "/actions/"+sup.ID+"/resolve", map[string]any{"note": "done by hand"}); status != 200 {
				t.Fatalf("resolve: %d %v", status, out)
			}
			sc := w.detail(sup.ID)["corrections"].([]any)[0].(map[string]any)
			if sc["state"] != "refused" || !strings.Contains(sc["decision_note"].(string), "resolve") {
				t.Errorf("after Resolve the waiting correction is %v", sc)
			}

			var acts []string
			for _, x := range d["audit"].([]any) {
				e := x.(map[string]any)
				acts = append(acts, fmt.Sprint(e["actor"], " ", e["act"]))
			}
			want := map[string]string{
				"another_person": "token:proposer correct,token:proposer refuse-correction,token:proposer correct,token:other approve-correction",
				"self":           "token:proposer correct,token:proposer approve-correction"}[rule]
			if strings.Join(acts, ",") != want {
				t.Errorf("audit: %v, want %s", acts, want)
			}
		})
	}
}
