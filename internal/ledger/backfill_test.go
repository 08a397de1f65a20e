package ledger_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/backfill"
	"github.com/oncehook/oncehook/internal/config"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/inbox"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/metrics"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
	"github.com/oncehook/oncehook/web"
)

const (
	bfStripeKey = "rk_test_backfill"
	bfGitHubTok = "ghp_backfill"
	bfGitHubSec = "gh-backfill-secret"
	bfHook      = "repos/acme/shop/hooks/7"
)

// backfillConfig: a Stripe source and a GitHub source that backfill from sandboxes
// (%[1]s Stripe's, %[2]s GitHub's), and one rule each.
const backfillConfig = `
sources:
  - name: stripe-bf
    client: acme
    provider: stripe
    environment: live
    secret_env: STRIPE_SECRET
    backfill: {api_key_env: STRIPE_KEY, every: 15m, window: 72h, api_url: "%[1]s"}
  - name: gh
    client: acme
    provider: github
    environment: live
    secret_env: GH_SECRET
    backfill: {token_env: GH_TOKEN, hook: %[3]s, api_url: "%[2]s"}
destinations:
  - {name: crm, type: http, create: {url: "http://127.0.0.1:1/x"}, owner: crm@example.com}
actions:
  - name: open_opportunity
    source: stripe-bf
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
  - name: triage_issue
    source: gh
    on: [issues.opened]
    key: [/issue/id]
    destination: crm
`

// backfillWorld is oncehook's ingest and a backfiller in front of the sandboxes.
type backfillWorld struct {
	t       *testing.T
	pool    *pgxpool.Pool
	cfg     *settings.Config
	inbox   *inbox.Inbox
	url     string
	stripe  *sandbox.StripeAPI
	github  *sandbox.GitHubHook
	metrics *metrics.Metrics
	logs    *syncBuffer
}

func newBackfillWorld(t *testing.T, pool *pgxpool.Pool) *backfillWorld {
	t.Helper()
	w := &backfillWorld{t: t, pool: pool, logs: &syncBuffer{}}
	if w.pool == nil {
		w.pool = dbtest.New(t)
	}
	w.stripe = &sandbox.StripeAPI{Key: bfStripeKey}
	stripeSrv := httptest.NewServer(w.stripe.Handler())
	t.Cleanup(stripeSrv.Close)
	w.github = &sandbox.GitHubHook{Base: bfHook, Token: bfGitHubTok, Secret: bfGitHubSec}
	githubSrv := httptest.NewServer(w.github.Handler())
	t.Cleanup(githubSrv.Close)
	env := map[string]string{"STRIPE_SECRET": stripeSecret, "STRIPE_KEY": bfStripeKey, "GH_SECRET": bfGitHubSec, "GH_TOKEN": bfGitHubTok}
	cfg, err := config.Parse("backfill.yaml", []byte(fmt.Sprintf(backfillConfig, stripeSrv.URL, githubSrv.URL, bfHook)),
		func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	w.cfg = cfg
	logger := slog.New(slog.NewTextHandler(w.logs, nil))
	w.inbox = inbox.New(w.pool, logger, nil)
	t.Cleanup(w.inbox.Close)
	w.metrics = metrics.New(w.pool)
	srv := httptest.NewServer(web.New(web.Params{Config: cfg, Pool: w.pool, Inbox: w.inbox,
		Review: review.New(w.pool, cfg, nil), Logger: logger, Metrics: w.metrics}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	w.github.Target = srv.URL + "/hooks/gh"
	return w
}

func (w *backfillWorld) backfiller(owner string) *backfill.Backfiller {
	return backfill.New(backfill.Params{Pool: w.pool, Config: w.cfg, Inbox: w.inbox,
		Clients: provider.NewBackfillClients(w.cfg), Logger: slog.New(slog.NewTextHandler(w.logs, nil)),
		Metrics: w.metrics, Owner: owner})
}

// checkoutEvent is a Stripe checkout.session.completed created ago before now.
func checkoutEvent(id, enquiry string, ago time.Duration) sandbox.StripeEvent {
	return sandbox.StripeEvent{ID: id, Type: "checkout.session.completed", Created: time.Now().Add(-ago).Unix(),
		Object: map[string]any{"id": "cs_" + id, "metadata": map[string]any{"enquiry_id": enquiry}}}
}

// webhook posts ev as Stripe's webhook would (its body differs from the API's copy).
func (w *backfillWorld) webhook(ev sandbox.StripeEvent) map[string]any {
	w.t.Helper()
	body := []byte(fmt.Sprintf(`{"id":%q,"object":"event","type":%q,"created":%d,"data":{"object":{"id":"cs_%s","metadata":{"enquiry_id":%q}}},"pending_webhooks":1}`,
		ev.ID, ev.Type, ev.Created, ev.ID, ev.Object["metadata"].(map[string]any)["enquiry_id"]))
	hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: body})
	if err != nil {
		w.t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, w.url+"/hooks/stripe-bf", strings.NewReader(string(body)))
	req.Header = hdr
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		w.t.Fatalf("webhook %s: %d", ev.ID, res.StatusCode)
	}
	return nil
}

func (w *backfillWorld) count(sql string, args ...any) int {
	w.t.Helper()
	var n int
	if err := w.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		w.t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func onlyResult(t *testing.T, rs []ledger.BackfillResult, source string) ledger.BackfillResult {
	t.Helper()
	for _, r := range rs {
		if r.Source == source {
			return r
		}
	}
	t.Fatalf("no pass ran for %s: %+v", source, rs)
	return ledger.BackfillResult{}
}

func TestStripeBackfillStoresWhatWasMissed(t *testing.T) {
	t.Parallel()
	w := newBackfillWorld(t, nil)
	w.stripe.SetMaxPage(2) // five events over three pages
	var evs []sandbox.StripeEvent
	for i := range 5 {
		evs = append(evs, checkoutEvent(fmt.Sprintf("evt_bf_%d", i), fmt.Sprintf("enq_bf_%d", i), time.Duration(i+1)*time.Hour))
	}
	old := checkoutEvent("evt_bf_old", "enq_old", 80*time.Hour) // outside the 72h window
	other := sandbox.StripeEvent{ID: "evt_bf_inv", Type: "invoice.created", Created: time.Now().Unix(), Object: map[string]any{}}
	w.stripe.Add(append(evs, old, other)...)
	// Two arrived while the endpoint was up; the rest were missed.
	w.webhook(evs[0])
	w.webhook(evs[3])
	var arrivedAt time.Time
	if err := w.pool.QueryRow(context.Background(), `SELECT last_received_at FROM events WHERE source_event_id = 'evt_bf_0'`).Scan(&arrivedAt); err != nil {
		t.Fatal(err)
	}

	r := onlyResult(t, w.backfiller("p1").RunDue(context.Background(), false), "stripe-bf")
	if r.Err != nil || r.Listed != 5 || r.Missing != 3 || r.Stored != 3 {
		t.Fatalf("pass = %+v, want 5 listed, 3 missing, 3 stored", r)
	}
	for _, q := range w.stripe.Requests() {
		if !strings.Contains(q, "types%5B%5D=checkout.session.completed") || !strings.Contains(q, "created%5Bgte%5D=") ||
			strings.Contains(q, "invoice") {
			t.Errorf("request %q does not list the rules' types within the window", q)
		}
	}
	if n := len(w.stripe.Requests()); n != 3 {
		t.Errorf("%d list requests, want 3 pages", n)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE via = 'backfill' AND deliveries = 1 AND source_event_id IN ('evt_bf_1','evt_bf_2','evt_bf_4')`); n != 3 {
		t.Errorf("%d missed events stored as backfilled, want 3", n)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE via = 'webhook' AND deliveries = 1 AND NOT conflict AND last_received_at = $1 AND source_event_id = 'evt_bf_0'`, arrivedAt); n != 1 {
		t.Errorf("an event that arrived was touched by the pass")
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id IN ('evt_bf_old', 'evt_bf_inv')`); n != 0 {
		t.Errorf("events outside the window or the rules' types were stored")
	}

	// A late real delivery of a backfilled event folds into it: a repeat, no conflict.
	w.webhook(evs[2])
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = 'evt_bf_2' AND deliveries = 2 AND NOT conflict AND via = 'backfill'`); n != 1 {
		t.Errorf("the late delivery did not fold into the backfilled event")
	}
	if n := w.count(`SELECT count(*) FROM event_conflicts`); n != 0 {
		t.Errorf("%d conflicting bodies kept, want 0", n)
	}

	// The router routes backfilled events like any other: one action per enquiry.
	eng := engine.New(engine.Params{Pool: w.pool, Config: w.cfg, Logger: slog.New(slog.NewTextHandler(w.logs, nil))})
	if _, err := eng.RouteBatch(context.Background(), 100); err != nil {
		t.Fatal(err)
	}
	if n := w.count(`SELECT count(*) FROM actions WHERE name = 'open_opportunity'`); n != 5 {
		t.Errorf("%d actions, want 5", n)
	}

	// The next pass finds nothing missing; it is not due before every has passed.
	if rs := w.backfiller("p1").RunDue(context.Background(), false); len(rs) != 0 {
		t.Errorf("a pass ran before it was due: %+v", rs)
	}
	r = onlyResult(t, w.backfiller("p1").RunDue(context.Background(), true), "stripe-bf")
	if r.Err != nil || r.Missing != 0 || r.Stored != 0 || r.Listed != 5 {
		t.Errorf("second pass = %+v, want 5 listed and nothing missing", r)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source = 'stripe-bf'`); n != 5 {
		t.Errorf("%d events, want 5", n)
	}
	w.metric(`oncehook_backfill_events_total{result="stored",source="stripe-bf"} 3`)
	w.metric(`oncehook_backfill_passes_total{outcome="ok",source="stripe-bf"} 2`)
}

// metric fails the test unless /metrics shows line.
func (w *backfillWorld) metric(line string) {
	w.t.Helper()
	res, err := http.Get(w.url + "/metrics")
	if err != nil {
		w.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if !strings.Contains(string(b), line) {
		w.t.Errorf("/metrics lacks %s", line)
	}
}

func TestBackfillTwoProcessesStoreEachEventOnce(t *testing.T) {
	t.Parallel()
	w := newBackfillWorld(t, nil)
	w.stripe.SetMaxPage(3)
	for i := range 12 {
		w.stripe.Add(checkoutEvent(fmt.Sprintf("evt_two_%d", i), fmt.Sprintf("enq_two_%d", i), time.Duration(i+1)*time.Minute))
	}
	a, b := w.backfiller("process-a"), w.backfiller("process-b")
	// Process a's pass is under way (its first list request waits in the
	// sandbox) when process b asks for one: the two overlap however the machine
	// schedules them.
	release := w.stripe.Hold()
	defer release()
	results := make([][]ledger.BackfillResult, 2)
	done := make(chan struct{})
	go func() { defer close(done); results[0] = a.RunDue(context.Background(), true) }()
	deadline := time.Now().Add(30 * time.Second)
	for len(w.stripe.Requests()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("process a never asked Stripe for events")
		}
		time.Sleep(5 * time.Millisecond) // poll interval
	}
	results[1] = b.RunDue(context.Background(), true)
	release()
	<-done
	ran := 0
	for _, rs := range results {
		for _, r := range rs {
			if r.Source == "stripe-bf" {
				ran++
			}
		}
	}
	if ran != 1 {
		t.Errorf("%d Stripe passes ran at once, want 1", ran)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source = 'stripe-bf'`); n != 12 {
		t.Errorf("%d events stored, want 12", n)
	}
	if n := w.count(`SELECT passes FROM backfill_state WHERE source = 'stripe-bf'`); n != 1 {
		t.Errorf("passes recorded = %d, want 1", n)
	}
	// Even passes that run one after the other store nothing twice.
	a.RunDue(context.Background(), true)
	b.RunDue(context.Background(), true)
	if n := w.count(`SELECT count(*) FROM events WHERE source = 'stripe-bf'`); n != 12 {
		t.Errorf("%d events after more passes, want 12", n)
	}
}
