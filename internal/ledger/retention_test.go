package ledger_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/partitions"
	"github.com/oncehook/oncehook/internal/retention"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
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
		w.exec(`INSERT INTO audit (client, action_id, actor, act, note, part_day)
			SELECT client, id, 'ada', 'note', 'kept or not', rows_day FROM actions`)
		history := func(key string) (attempts, audit int) {
			attempts = w.count(`SELECT count(*) FROM attempts t JOIN actions a ON a.client = t.client AND a.id = t.action_id
				WHERE a.business_key = '` + key + `'`)
			audit = w.count(`SELECT count(*) FROM audit u JOIN actions a ON a.client = u.client AND a.id = u.action_id
				WHERE a.business_key = '` + key + `'`)
			return attempts, audit
		}
		keptAttempts, keptAudit := history("enq_r2")
		allAttempts, allAudit := w.count(`SELECT count(*) FROM attempts`), w.count(`SELECT count(*) FROM audit`)
		if keptAttempts != 2 || keptAudit != 2 || allAttempts != 4 || allAudit != 4 {
			t.Fatalf("before the prune: enq_r2 has %d attempts and %d audit entries of %d and %d; want 2 of 4 each",
				keptAttempts, keptAudit, allAttempts, allAudit)
		}
		cfg := *w.cfg
		cfg.Retention.DropBodiesAfter = 7 * 24 * time.Hour
		// Nine days on, today's bodies are wholly past their window: the day goes.
		r, err := retention.Prune(context.Background(), w.pool, &cfg, time.Now().AddDate(0, 0, 9))
		if err != nil {
			t.Fatal(err)
		}
		// The days of attempts and audit before this migration's (1970-01-01,
		// empty here) are past the ledger window too, and go.
		if r.Actions != 2 || r.BodyDays == 0 || r.BodiesCarried != 0 || r.Events != 0 || r.RowDays != 2 || r.DaysKept != 0 {
			t.Errorf("prune %+v; want 2 closed actions, the bodies' days, the two days of 1970, no events", r)
		}
		if n := w.count(`SELECT count(*) FROM actions`); n != 2 {
			t.Errorf("%d actions left, want enq_r2's two", n)
		}
		// The pruned actions' attempts and audit went with them (no foreign key
		// cascades into the partitions: the prune deletes them by their day).
		if a, u := w.count(`SELECT count(*) FROM attempts`), w.count(`SELECT count(*) FROM audit`); a != keptAttempts || u != keptAudit {
			t.Errorf("%d attempts and %d audit entries left, want enq_r2's %d and %d", a, u, keptAttempts, keptAudit)
		}
		if n := w.count(`SELECT count(*) FROM events e WHERE body IS NULL AND length(body_sha256) = 32
			AND NOT EXISTS (SELECT 1 FROM event_bodies b WHERE b.client = e.client AND b.event_id = e.id)`); n != 2 {
			t.Errorf("%d events kept with identity and hash only, want 2", n)
		}
		// A repeat of a delivery whose body was dropped is still recognised.
		if again := w.deliver(checkout{eventID: "evt_r2", enquiry: "enq_r2"}); again["duplicate"] != true {
			t.Errorf("repeat after the body was dropped: %v", again)
		}
		if n := w.count(`SELECT count(*) FROM actions`); n != 2 {
			t.Errorf("%d actions after the repeat, want enq_r2's two", n)
		}
	})
	t.Run("DaysDroppedKeepWhatOpenActionsNeed", keepWhatOpenActionsNeed)
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

// keepWhatOpenActionsNeed: a year and more on, every day of today's partitions
// is past its window. The action a person must still resolve keeps its body,
// attempts and audit, carried into the day of the pass; the closed actions'
// rows go with their days; the delivery identities stay (remembered longer), so
// a redelivery of a dropped body is a duplicate and calls no one again.
func keepWhatOpenActionsNeed(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{})
	w.crm.Fail(sandbox.Fault{Status: 422, Message: "amount must be positive"})
	w.deliver(checkout{eventID: "evt_open", enquiry: "enq_open"})
	open := w.waitFor("open_opportunity", "enq_open", "failed") // its welcome mail waits for it
	w.deliver(checkout{eventID: "evt_done", enquiry: "enq_done"})
	w.waitFor("open_opportunity", "enq_done", "confirmed")
	w.waitFor("send_welcome_email", "enq_done", "confirmed")
	w.exec(`INSERT INTO audit (client, action_id, actor, act, note, part_day)
		SELECT client, id, 'ada', 'note', 'looked at it', rows_day FROM actions`)
	records := len(w.crm.Records())

	cfg := *w.cfg
	cfg.Retention.DropBodiesAfter = 7 * 24 * time.Hour
	cfg.Sources = slices.Clone(cfg.Sources)
	for i := range cfg.Sources {
		cfg.Sources[i].Remember = 500 * 24 * time.Hour
	}
	later := time.Now().AddDate(0, 0, 401)
	today, day := partitions.Day(time.Now()).Format("20060102"), partitions.Day(later)
	r, err := retention.Prune(context.Background(), w.pool, &cfg, later)
	if err != nil {
		t.Fatal(err)
	}
	if r.Actions != 2 || r.ActionsCarried != 2 || r.BodiesCarried != 1 || r.DaysKept != 0 || r.Events != 0 {
		t.Errorf("prune %+v; want the 2 closed actions pruned, the 2 open ones and their event's body carried, no identity", r)
	}
	for _, part := range []string{"event_bodies_", "attempts_", "audit_"} {
		if n := w.count(`SELECT count(*) FROM pg_class WHERE relname = $1`, part+today); n != 0 {
			t.Errorf("%s%s is still there, want it dropped", part, today)
		}
	}
	rowsDay := func(sql string) int { return w.count(sql, open.ID, day) }
	if n := rowsDay(`SELECT count(*) FROM actions WHERE id = $1 AND rows_day = $2 AND state = 'failed'`); n != 1 {
		t.Errorf("the open action's rows are not in the day of the pass (%d)", n)
	}
	if n := rowsDay(`SELECT count(*) FROM attempts WHERE action_id = $1 AND part_day = $2`); n != 1 {
		t.Errorf("the open action has %d attempts in the day of the pass, want its 1", n)
	}
	if n := rowsDay(`SELECT count(*) FROM audit WHERE action_id = $1 AND part_day = $2 AND note = 'looked at it'`); n != 1 {
		t.Errorf("the open action has %d notes in the day of the pass, want its 1", n)
	}
	if n, m := w.count(`SELECT count(*) FROM attempts`), w.count(`SELECT count(*) FROM audit`); n != 1 || m < 2 ||
		m != w.count(`SELECT count(*) FROM audit u JOIN actions a ON a.client = u.client AND a.id = u.action_id
			WHERE a.business_key = 'enq_open' AND u.part_day = $1`, day) {
		t.Errorf("%d attempts and %d audit entries left, want the open actions' only, in the day of the pass", n, m)
	}
	body := func(eventID string) int {
		return w.count(`SELECT count(*) FROM events e JOIN event_bodies b
			ON b.client = e.client AND b.event_id = e.id AND b.day = e.body_day WHERE e.source_event_id = $1`, eventID)
	}
	if body("evt_open") != 1 || body("evt_done") != 0 {
		t.Errorf("bodies: the open action's event %d, the closed one's %d; want 1 and 0", body("evt_open"), body("evt_done"))
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id IN ('evt_open', 'evt_done')`); n != 2 {
		t.Errorf("%d delivery identities left, want both", n)
	}
	if again := w.deliver(checkout{eventID: "evt_done", enquiry: "enq_done"}); again["duplicate"] != true {
		t.Errorf("a redelivery whose body was dropped: %v, want a duplicate", again)
	}
	if n := w.count(`SELECT count(*) FROM actions`); n != 2 || len(w.crm.Records()) != records {
		t.Errorf("%d actions and %d CRM records after the redelivery, want the 2 open ones and %d", n, len(w.crm.Records()), records)
	}
}

// perClientConfig gives stripe-simple a client of its own, globex, and each
// client a window of its own around the shared 10 days of bodies: globex's
// bodies 2 days and its closed actions 3, acme's bodies 30 days.
func perClientConfig(y string) string {
	y = strings.Replace(y, "{name: stripe-simple, client: acme,", "{name: stripe-simple, client: globex,", 1)
	return y + `
retention: {drop_bodies_after: 240h}
clients:
  globex: {retention: {drop_bodies_after: 48h, actions: 72h}}
  acme: {retention: {drop_bodies_after: 720h}}
`
}

// TestRetentionPerClient: one pass applies each client's own windows. Four days
// on, globex's body and closed action are past its shorter windows and go,
// deleted row by row, while acme's, in the same day's partitions, stay.
// Fifteen days on the shared window drops that day: acme's body, inside its
// longer window, is carried forward first; forty-five days on, past its own
// window too, it goes with its day.
func TestRetentionPerClient(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{yaml: perClientConfig})
	acme := checkout{eventID: "evt_acme", enquiry: "enq_acme"}
	globex := checkout{eventID: "evt_globex", enquiry: "enq_globex"}
	w.deliver(acme)
	body := globex.body()
	hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if status, out := w.request("POST", "/hooks/stripe-simple", hdr, body); status != http.StatusOK {
		t.Fatalf("deliver to stripe-simple: %d %v", status, out)
	}
	w.waitFor("send_welcome_email", acme.enquiry, "confirmed")
	w.waitFor("log_checkout", globex.enquiry, "confirmed")
	w.stop()
	ids := map[string]int{}
	for _, c := range []checkout{acme, globex} {
		ids[c.eventID] = w.count(`SELECT id FROM events WHERE source_event_id = $1`, c.eventID)
	}
	// bodyOf counts the bodies of c in every day (its identity may go by its
	// source's own window, 30 days, and the bytes must not stay behind).
	bodyOf := func(c checkout) int {
		return w.count(`SELECT count(*) FROM event_bodies WHERE event_id = $1 AND body IS NOT NULL`, ids[c.eventID])
	}
	actionsOf := func(client string) int { return w.count(`SELECT count(*) FROM actions WHERE client = $1`, client) }
	ctx := context.Background()

	r, err := retention.Prune(ctx, w.pool, w.cfg, time.Now().AddDate(0, 0, 4))
	if err != nil {
		t.Fatal(err)
	}
	if r.ClientBodies != 1 || r.Actions != 1 || r.BodyDays != 0 {
		t.Errorf("four days on: %+v; want globex's body and its action, no day dropped", r)
	}
	if a, g := bodyOf(acme), bodyOf(globex); a != 1 || g != 0 {
		t.Errorf("four days on: acme's body %d, globex's %d; want acme's kept, globex's gone", a, g)
	}
	if a, g := actionsOf("acme"), actionsOf("globex"); a != 2 || g != 0 {
		t.Errorf("four days on: %d actions of acme, %d of globex; want acme's 2 kept, globex's gone", a, g)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = $1`, globex.eventID); n != 1 {
		t.Errorf("globex's delivery identity: %d rows, want it kept (a redelivery is a duplicate)", n)
	}

	r, err = retention.Prune(ctx, w.pool, w.cfg, time.Now().AddDate(0, 0, 15))
	if err != nil {
		t.Fatal(err)
	}
	if r.BodyDays == 0 || r.BodiesCarried != 1 {
		t.Errorf("fifteen days on: %+v; want today's days of bodies dropped and acme's body carried", r)
	}
	if n := bodyOf(acme); n != 1 {
		t.Errorf("fifteen days on: acme's body %d, want it kept by its 30 days", n)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = $1 AND body_day = $2::date`, acme.eventID,
		partitions.Day(time.Now().AddDate(0, 0, 15))); n != 1 {
		t.Errorf("acme's body is not in the day of the pass that carried it")
	}

	r, err = retention.Prune(ctx, w.pool, w.cfg, time.Now().AddDate(0, 0, 45))
	if err != nil {
		t.Fatal(err)
	}
	if r.BodiesCarried != 0 || bodyOf(acme) != 0 {
		t.Errorf("forty-five days on: %+v, acme's body %d; want it gone with its day", r, bodyOf(acme))
	}
}
