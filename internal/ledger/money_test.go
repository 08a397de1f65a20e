package ledger_test

import (
	"strings"
	"testing"
)

// A money param whose currency the event gives as no ISO 4217 code is never sent
// as null: the action goes to a person with the reason in words and the CRM
// receives nothing; corrected and approved, it is performed once, with the
// corrected amount. An event with a known currency beside it is performed as usual.
func TestUnfillableMoneyGoesToAPerson(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{crmExtra: "    corrections: {approve: self}", yaml: func(y string) string {
		return strings.Replace(y, "      amount: /data/object/amount_total\n",
			"      amount: {money: /data/object/amount_total, currency: /data/object/currency}\n", 1)
	}})
	fixer := w.newToken("fixer", "admin")
	enquiries := func(enq string) []map[string]any {
		var out []map[string]any
		for _, r := range w.crm.Records() {
			if r.Fields["enquiry_id"] == enq {
				out = append(out, r.Fields)
			}
		}
		return out
	}

	w.deliver(checkout{eventID: "evt_xxq", enquiry: "enq-xxq", amount: 4200, currency: "xxq"})
	w.deliver(checkout{eventID: "evt_usd", enquiry: "enq-usd", amount: 4200})
	a := w.waitFor("open_opportunity", "enq-xxq", "failed")
	w.waitFor("open_opportunity", "enq-usd", "confirmed")
	if got := enquiries("enq-usd"); len(got) != 1 || got[0]["amount"] != "42.00" {
		t.Fatalf("the CRM holds %v for the usd checkout, want one record of 42.00", got)
	}
	d := w.detail(a.ID)
	reason, _ := d["reason"].(string)
	if !strings.Contains(reason, `amount: the currency "xxq" is not an ISO 4217 code`) {
		t.Errorf("the action's reason is %q: it should name the param and why", reason)
	}
	if got := enquiries("enq-xxq"); len(got) != 0 {
		t.Fatalf("the CRM received %v for an amount the event could not fill", got)
	}

	if status, out := w.api(fixer, "POST", "/actions/"+a.ID+"/correct", map[string]any{
		"params": map[string]any{"enquiry_id": "enq-xxq", "amount": "42.00"}, "note": "the customer paid in USD"}); status != 200 {
		t.Fatalf("correct: %d %v", status, out)
	}
	if status, out := w.api(fixer, "POST", "/actions/"+a.ID+"/approve-correction", nil); status != 200 {
		t.Fatalf("approve: %d %v", status, out)
	}
	w.waitFor("open_opportunity", "enq-xxq", "confirmed")
	if got := enquiries("enq-xxq"); len(got) != 1 || got[0]["amount"] != "42.00" {
		t.Errorf("after the correction the CRM holds %v, want one record of 42.00", got)
	}
}
