package ledger_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
)

// betaClient adds a second client to the ledger's config: its own Stripe source
// and a rule that creates a CRM record for each checkout.
func betaClient(yaml string) string {
	yaml = strings.Replace(yaml, "\ndestinations:\n",
		"\n  - {name: stripe-beta, client: beta, provider: stripe, account: acct_3, environment: live, secret_env: STRIPE_SECRET}\ndestinations:\n", 1)
	return yaml + `  - name: beta_checkout
    source: stripe-beta
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params:
      enquiry_id: /data/object/metadata/enquiry_id
`
}

// The router and the performer go round the clients: while one client's burst of
// 10,000 events is routed and performed, another client's single event is
// confirmed within 2 s, instead of waiting behind the whole burst.
func TestOneClientsBurstDoesNotDelayAnother(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{yaml: betaClient})
	const burst = 10_000
	w.exec(`INSERT INTO events (client, environment, source, source_event_id, type, body, body_sha256)
SELECT 'acme', 'live', 'stripe-simple', 'evt_burst_' || i, 'checkout.session.completed',
       convert_to(format('{"id":"evt_burst_%s","type":"checkout.session.completed","created":1700000000,'
           '"data":{"object":{"id":"cs_burst_%s","amount_total":100,"metadata":{"enquiry_id":"enq_burst_%s"}}}}', i, i, i), 'UTF8'),
       '\x00'
FROM generate_series(1, $1::int) AS i`, burst)
	waitUntil(t, 20*time.Second, "the burst's first action confirmed", func() bool {
		return w.count(`SELECT count(*) FROM actions WHERE client = 'acme' AND state = 'confirmed'`) > 0
	})

	w.deliverBeta(checkout{eventID: "evt_beta", enquiry: "enq_beta", amount: 300})
	acked := time.Now()
	for w.count(`SELECT count(*) FROM actions WHERE client = 'beta' AND state = 'confirmed'`) != 1 {
		if time.Since(acked) > 2*time.Second {
			var status, state string
			_ = w.pool.QueryRow(context.Background(), `SELECT e.status, coalesce(a.state, 'no action')
				FROM events e LEFT JOIN actions a ON a.client = e.client
				WHERE e.client = 'beta'`).Scan(&status, &state)
			t.Fatalf("beta's action not confirmed within 2 s of its delivery: its event is %s, its action %s", status, state)
		}
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	took := time.Since(acked)
	// The burst was still being worked when beta's action was confirmed.
	left := w.count(`SELECT (SELECT count(*) FROM event_queue WHERE client = 'acme')
		+ (SELECT count(*) FROM actions WHERE client = 'acme' AND state <> 'confirmed')`)
	if left == 0 {
		t.Fatalf("acme's burst of %d was over when beta's action was confirmed; the test needs it running", burst)
	}
	var found int
	for _, r := range w.crm.Records() {
		if r.Fields["enquiry_id"] == "enq_beta" {
			found++
		}
	}
	if found != 1 {
		t.Errorf("the CRM holds %d records for beta's enquiry, want 1", found)
	}
	t.Logf("beta's action confirmed %v after its delivery, with %d of acme's %d still to do", took.Round(time.Millisecond), left, burst)
}

// waitUntil polls ok until it holds, and fails the test when within passes first.
func waitUntil(t *testing.T, within time.Duration, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// deliverBeta posts c as Stripe would to beta's source, and fails the test unless it
// is acknowledged.
func (w *world) deliverBeta(c checkout) {
	w.t.Helper()
	body := c.body()
	hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: body})
	if err != nil {
		w.t.Fatal(err)
	}
	if status, out := w.request("POST", "/hooks/stripe-beta", hdr, body); status != http.StatusOK {
		w.t.Fatalf("deliver beta's event: status %d %v", status, out)
	}
}

// heldBetaWorld is a world of betaClient without an engine, whose CRM is
// disconnected, with beta's checkout c delivered and routed: its action is held.
func heldBetaWorld(t *testing.T, c checkout) *world {
	t.Helper()
	w := newWorld(t, worldOptions{yaml: betaClient, noEngine: true})
	w.exec(`INSERT INTO destinations (name, status, reason, changed_at) VALUES ('crm', 'disconnected', 'refused', now())
		ON CONFLICT (name) DO UPDATE SET status = EXCLUDED.status`)
	w.deliverBeta(c)
	w.route()
	return w
}

// withoutBeta is the config of betaClient with beta's source and rule taken out
// again: beta is no longer configured, while its actions stay in the database.
func withoutBeta(yaml string) string {
	var kept []string
	for _, line := range strings.Split(yaml[:strings.Index(yaml, "  - name: beta_checkout")], "\n") {
		if !strings.Contains(line, "stripe-beta") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}

// A held action whose client the config no longer names is released by recovery
// once its destination is connected, and performed once. On Citus recovery goes
// client by client, so it must go round the clients with work in the database, not
// only the config's.
func TestHeldActionOfARemovedClientIsReleased(t *testing.T) {
	t.Parallel()
	w := heldBetaWorld(t, checkout{eventID: "evt_gone", enquiry: "enq_gone"})
	if n := w.count(`SELECT count(*) FROM actions WHERE client = 'beta' AND state = 'held'`); n != 1 {
		t.Fatalf("%d held actions of beta, want 1", n)
	}
	// The destination is connected again behind the held action's back (a router
	// that read it disconnected, committing after the reconnect released the rest),
	// and beta leaves the config.
	w.exec(`UPDATE destinations SET status = 'connected', reason = 'reconnected' WHERE name = 'crm'`)
	w.yaml = withoutBeta(w.yaml)
	cfg := w.loadConfig()
	if slices.Contains(cfg.Clients(), "beta") {
		t.Fatalf("the config still names beta: %v", cfg.Clients())
	}
	w.startEngineWith(func(p *engine.Params) { p.Config = cfg })
	w.waitFor("beta_checkout", "enq_gone", "confirmed")
	found := 0
	for _, r := range w.crm.Records() {
		if r.Fields["enquiry_id"] == "enq_gone" {
			found++
		}
	}
	if found != 1 {
		t.Errorf("the CRM holds %d records for the removed client's action, want 1", found)
	}
}

// An action of a client the config no longer names that waits for a person says
// so as its next step, and a person can close it: cancelled, it is never sent.
func TestActionOfARemovedClientCanBeClosed(t *testing.T) {
	t.Parallel()
	w := heldBetaWorld(t, checkout{eventID: "evt_left", enquiry: "enq_left"})
	w.yaml = withoutBeta(w.yaml)
	rv := review.New(w.pool, w.loadConfig(), nil)
	ctx := context.Background()
	page, err := rv.ListActions(ctx, review.ActionFilter{States: []string{ledger.StateHeld}, Limit: 10})
	if err != nil || len(page.Actions) != 1 || page.Actions[0].Client != "beta" {
		t.Fatalf("the held queue of the config without beta lists %+v, %v; want beta's action", page.Actions, err)
	}
	a := page.Actions[0]
	step, err := rv.NextStep(ctx, a)
	if err != nil || !strings.Contains(step.Text, "no longer configured") {
		t.Errorf("the next step is %q, %v; want it to say the client is no longer configured", step.Text, err)
	}
	// The queue shows it as a cause of its own: the client, not the destination's
	// disconnection, is what a person deals with.
	waiting, err := rv.Waiting(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var causes []string
	for _, c := range waiting.Causes {
		causes = append(causes, fmt.Sprintf("%s %d: %s -> %s", c.State, c.Count, c.Label, c.Fix))
	}
	if want := "held 1: crm: its client beta is no longer configured -> Cancel, or Resolve if done another way"; !slices.Contains(causes, want) || len(causes) != 1 {
		t.Errorf("the causes are %q; want only %q", causes, want)
	}
	admin := ledger.Actor{Name: "boss@example.com", Role: settings.RoleAdmin}
	done, err := rv.Do(ctx, admin, review.ActCancel, a.ID, review.ActParams{Note: "beta left"})
	if err != nil || done.State != ledger.StateCancelled {
		t.Fatalf("cancel: %+v, %v", done, err)
	}
	// Connected again, recovery releases held actions only: the cancelled one stays.
	w.exec(`UPDATE destinations SET status = 'connected' WHERE name = 'crm'`)
	eng := engine.New(engine.Params{Pool: w.pool, Config: w.loadConfig(), Logger: slog.New(slog.DiscardHandler)})
	if _, err := eng.RecoverLeases(ctx); err != nil {
		t.Fatal(err)
	}
	if n := w.count(`SELECT count(*) FROM actions WHERE client = 'beta' AND state = 'cancelled'`); n != 1 {
		t.Errorf("%d cancelled actions of beta after recovery, want 1", n)
	}
	if n := len(w.crm.Records()); n != 0 {
		t.Errorf("the CRM holds %d records of a cancelled action", n)
	}
}
