package ledger_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/partitions"
)

// moveBytes puts the bytes of the event with source id to the day's partition, as
// if they had come that day.
func (w *world) moveBytes(sourceEventID string, day time.Time) {
	w.t.Helper()
	w.exec(`INSERT INTO event_bodies (client, event_id, day, body, payload, headers)
		SELECT b.client, b.event_id, $2::date, b.body, b.payload, b.headers
		FROM event_bodies b JOIN events e ON e.client = b.client AND e.id = b.event_id AND e.body_day = b.day
		WHERE e.source_event_id = $1`, sourceEventID, day)
	w.exec(`DELETE FROM event_bodies b USING events e
		WHERE e.client = b.client AND e.id = b.event_id AND e.source_event_id = $1 AND b.day <> $2::date`, sourceEventID, day)
	w.exec(`UPDATE events SET body_day = $2::date WHERE source_event_id = $1`, sourceEventID, day)
}

// TestRedeliveryAcrossBodyPartitions: the identity of a delivery stays whole
// while its bytes sit in the partition of the day they came. A redelivery whose
// first copy came yesterday, and one whose first copy's partition retention has
// dropped since, are both duplicates: no second event, action or effect. The one
// whose bytes are gone cannot be replayed, and says why.
func TestRedeliveryAcrossBodyPartitions(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	today := partitions.Day(time.Now())
	yesterday, longAgo := today.AddDate(0, 0, -1), today.AddDate(0, 0, -30)
	if _, err := partitions.Make(context.Background(), db.New(w.pool), longAgo, longAgo); err != nil {
		t.Fatal(err)
	}
	came := checkout{eventID: "evt_yesterday", enquiry: "enq_yesterday"}
	gone := checkout{eventID: "evt_dropped", enquiry: "enq_dropped"}
	w.deliver(came)
	first := w.deliver(gone)
	w.waitFor("send_welcome_email", came.enquiry, "confirmed")
	w.waitFor("send_welcome_email", gone.enquiry, "confirmed")
	requests, mails := len(w.crm.Requests()), len(w.mail.Messages())

	w.moveBytes(came.eventID, yesterday)
	w.moveBytes(gone.eventID, longAgo)
	w.exec(`DROP TABLE event_bodies_` + longAgo.Format("20060102"))

	for _, c := range []checkout{came, gone} {
		if again := w.deliver(c); again["duplicate"] != true {
			t.Errorf("redelivery of %s: %v, want a duplicate", c.eventID, again)
		}
	}
	if n := w.count(`SELECT count(*) FROM events`); n != 2 {
		t.Errorf("%d events, want the 2 identities", n)
	}
	if n := w.count(`SELECT count(*) FROM event_queue`); n != 0 {
		t.Errorf("%d events waiting for the router, want none", n)
	}
	for _, name := range []string{"open_opportunity", "send_welcome_email"} {
		if a := w.actions(name); len(a) != 2 {
			t.Errorf("%d %s actions, want one a checkout: %+v", len(a), name, a)
		}
	}
	if r, m := len(w.crm.Requests()), len(w.mail.Messages()); r != requests || m != mails {
		t.Errorf("%d more CRM requests and %d more emails after the redeliveries, want none", r-requests, m-mails)
	}
	if n := w.count(`SELECT count(*) FROM event_bodies b JOIN events e ON e.client = b.client AND e.id = b.event_id
		AND e.body_day = b.day WHERE e.source_event_id = $1 AND b.day = $2::date`, came.eventID, yesterday); n != 1 {
		t.Errorf("the first copy's bytes of %s: %d rows in yesterday's partition, want them kept there, once", came.eventID, n)
	}
	status, out := w.api(w.token, "POST", fmt.Sprintf("/events/%v/replay", first["event_id"]), nil)
	if status != http.StatusConflict || !strings.Contains(fmt.Sprint(out["error"]), "retention") {
		t.Errorf("replay of the event whose bytes were dropped: %d %v, want 409 saying retention dropped them", status, out)
	}
}
