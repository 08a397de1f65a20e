package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// A person's Retry of an action whose call may have reached the destination looks
// the operation up before any call, when the destination has a lookup whose absence
// proves something: a day after the first call, the CRM no longer remembers the
// key, so a second create would be a second record.
func TestManualRetryLooksUpFirst(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{lookup: "strong", keyTTL: time.Millisecond})
	w.crm.LookupOutage(time.Hour)                                        // lookups prove nothing: the action stays uncertain
	w.crm.Fail(sandbox.Fault{AfterCommit: true, Delay: 4 * time.Second}) // stored, then past the 2s timeout
	w.deliver(checkout{eventID: "evt_rl", enquiry: "enq_rl"})
	a := w.waitFor("open_opportunity", "enq_rl", "uncertain")
	w.exec(`UPDATE actions SET first_attempt_at = now() - interval '25 hours' WHERE id = $1::bigint`, a.ID)

	deadline := time.Now().Add(10 * time.Second)
	for {
		status, out := w.api(w.token, "POST", "/actions/"+a.ID+"/retry", map[string]any{"note": "the CRM is back"})
		if status == 200 {
			if out["state"] != "uncertain" {
				t.Errorf("after Retry the action is %v, want uncertain (looked up before any call)", out["state"])
			}
			break
		}
		if status != 409 || time.Now().After(deadline) { // 409 while a worker holds it for a lookup
			t.Fatalf("retry: %d %v", status, out)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	w.crm.LookupOutage(0)
	b := w.waitFor("open_opportunity", "enq_rl", "confirmed")
	recs := w.crm.Records()
	if len(recs) != 1 || b.ExternalRef != recs[0].ID {
		t.Fatalf("CRM holds %d records %+v, action ref %q; want the one record, found by lookup", len(recs), recs, b.ExternalRef)
	}
	posts := 0
	for _, r := range w.crm.Requests() {
		if r.Method == "POST" {
			posts++
		}
	}
	if posts != 1 {
		t.Errorf("the CRM received %d creates; the retry must find the record, not create it again", posts)
	}
}

// A worker that stops while its lookup is in flight hands the uncertain action back
// and closes the lookup it started as abandoned: no attempt stays started.
func TestReleaseLeasesClosesStartedLookups(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true, lookup: "strong"})
	w.deliver(checkout{eventID: "evt_rel", enquiry: "enq_rel"})
	w.route()
	w.exec(`UPDATE actions SET state = 'processing', claimed_from = 'uncertain', lease_owner = 'w-gone',
		lease_expires_at = now() + interval '1 minute' WHERE name = 'open_opportunity'`)
	w.exec(`INSERT INTO attempts (client, action_id, kind, operation_key, worker, part_day)
		SELECT client, id, 'lookup', operation_key, 'w-gone', rows_day FROM actions WHERE name = 'open_opportunity'`)
	worker := "w-gone"
	released, err := db.New(w.pool).ActionReleaseLeases(context.Background(), db.ActionReleaseLeasesParams{Worker: &worker})
	if err != nil || len(released) != 1 {
		t.Fatalf("released %v, %v; want the one action", released, err)
	}
	if n := w.count(`SELECT count(*) FROM attempts WHERE status = 'started'`); n != 0 {
		t.Errorf("%d attempts left started, want 0", n)
	}
	if n := w.count(`SELECT count(*) FROM attempts WHERE status = 'abandoned' AND kind = 'lookup'`); n != 1 {
		t.Errorf("%d abandoned lookups, want 1", n)
	}
	if n := w.count(`SELECT count(*) FROM actions WHERE name = 'open_opportunity' AND state = 'uncertain'`); n != 1 {
		t.Errorf("the action is not back to uncertain")
	}
}
