package ledger_test

import (
	"context"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/retention"
)

func TestRetention(t *testing.T) {
	t.Parallel()
	t.Run("ReplayAfterDeliveryWindowFindsActionDone", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{})
		c := checkout{eventID: "evt_old", enquiry: "enq_old"}
		w.deliver(c)
		w.waitFor("send_welcome_email", "enq_old", "confirmed")
		requests := len(w.crm.Requests())
		w.exec(`UPDATE events SET received_at = now() - interval '31 days'`)

		r, err := retention.Prune(context.Background(), w.pool, w.cfg, time.Now())
		if err != nil || r.Events != 1 {
			t.Fatalf("prune: %+v %v; want the one event past the 720h window", r, err)
		}
		again := w.deliver(c)
		if again["duplicate"] != false {
			t.Fatalf("replay after the window: %v; want it stored again (duplicate false)", again)
		}
		ev := w.waitEvent(again["event_id"].(string))
		if ev["status"] != "routed" {
			t.Errorf("replayed event %v", ev["status"])
		}
		if a := w.actions("open_opportunity"); len(a) != 1 || a[0].State != "confirmed" {
			t.Errorf("actions %+v; want the one confirmed action", a)
		}
		if n := len(w.crm.Requests()); n != requests {
			t.Errorf("the CRM got %d more requests; the ledger must prevent a second effect", n-requests)
		}
		if n := len(w.mail.Messages()); n != 1 {
			t.Errorf("%d emails, want 1", n)
		}
	})
	t.Run("ClosedActionsAndBodies", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{})
		w.deliver(checkout{eventID: "evt_r1", enquiry: "enq_r1"})
		w.deliver(checkout{eventID: "evt_r2", enquiry: "enq_r2"})
		w.waitFor("send_welcome_email", "enq_r1", "confirmed")
		w.waitFor("send_welcome_email", "enq_r2", "confirmed")
		w.exec(`UPDATE actions SET updated_at = now() - interval '401 days' WHERE business_key = 'enq_r1'`)
		w.exec(`UPDATE events SET routed_at = now() - interval '8 days'`)
		cfg := *w.cfg
		cfg.Retention.DropBodiesAfter = 7 * 24 * time.Hour
		r, err := retention.Prune(context.Background(), w.pool, &cfg, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if r.Actions != 2 || r.BodiesDropped != 2 || r.Events != 0 {
			t.Errorf("prune %+v; want 2 closed actions and 2 bodies, no events", r)
		}
		if n := w.count(`SELECT count(*) FROM actions`); n != 2 {
			t.Errorf("%d actions left, want enq_r2's two", n)
		}
		if n := w.count(`SELECT count(*) FROM events e WHERE body IS NULL AND length(body_sha256) = 32
			AND NOT EXISTS (SELECT 1 FROM event_bodies b WHERE b.client = e.client AND b.event_id = e.id)`); n != 2 {
			t.Errorf("%d events kept with identity and hash only, want 2", n)
		}
		// A repeat of a delivery whose body was dropped is still recognised.
		if again := w.deliver(checkout{eventID: "evt_r2", enquiry: "enq_r2"}); again["duplicate"] != true {
			t.Errorf("repeat after the body was dropped: %v", again)
		}
	})
	t.Run("OnePrunerAtATime", func(t *testing.T) {
		t.Parallel()
		w := newWorld(t, worldOptions{noEngine: true})
		conn, err := w.pool.Acquire(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Release()
		if _, err := conn.Exec(context.Background(), "SELECT pg_advisory_lock(7262531)"); err != nil {
			t.Fatal(err)
		}
		defer conn.Exec(context.Background(), "SELECT pg_advisory_unlock(7262531)") //nolint:errcheck
		r, err := retention.Prune(context.Background(), w.pool, w.cfg, time.Now())
		if err != nil || !r.Skipped {
			t.Errorf("prune while another holds the lock: %+v %v; want skipped", r, err)
		}
	})
}
