package alerts_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/alerts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

const (
	slackPath    = "/services/T0ONCEHOOK/B0ALERTS01/abcdefghijklmnopqrstuvwx"
	routingKey   = "R0UT1NGKEY0123456789abcdefABCDEF" // 32 characters, as PagerDuty's
	hookSecret   = "whsec_b3V0YWdlLWFsZXJ0cw=="
	waitForAlert = 30 * time.Second
)

// receiver is the on-call team's webhook endpoint: it verifies each alert as a
// Standard Webhooks receiver does and keeps it.
type receiver struct {
	mu     sync.Mutex
	events []alerts.WebhookEvent
	ids    []string
	bad    int
}

func (r *receiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	_, err := provider.Verify(provider.VerifyParams{Provider: ledger.ProviderStandardWebhooks,
		Secrets: []string{hookSecret}, Now: time.Now(), Header: req.Header, Body: body})
	var ev alerts.WebhookEvent
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err != nil {
		r.bad++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	r.events = append(r.events, ev)
	r.ids = append(r.ids, req.Header.Get("webhook-id"))
}

func (r *receiver) all() []alerts.WebhookEvent {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]alerts.WebhookEvent(nil), r.events...)
}

// room is one test's on-call tools: Slack, PagerDuty, a webhook receiver and a
// mail server, the config naming them for the destination crm, and a database
// with actions of two clients waiting for crm.
type room struct {
	t     *testing.T
	pool  *pgxpool.Pool
	cfg   *settings.Config
	slack *sandbox.Slack
	pd    *sandbox.PagerDuty
	hook  *receiver
	mail  *sandbox.Mail
}

func newRoom(t *testing.T, quiet time.Duration) *room {
	t.Helper()
	r := &room{t: t, pool: dbtest.New(t), slack: sandbox.NewSlack(slackPath), pd: sandbox.NewPagerDuty(routingKey),
		hook: &receiver{}}
	serve := func(h http.Handler) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	slackURL, pdURL, hookURL := serve(r.slack), serve(r.pd), serve(r.hook)
	var err error
	if r.mail, err = sandbox.StartMail("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.mail.Close)
	r.cfg = &settings.Config{BaseURL: "https://oncehook.example",
		Destinations: []settings.Destination{{Name: "crm", Owner: "crm-admin@example.com",
			Alerts: []string{"ops", "pager", "hook", settings.AlertOwnerMail}}},
		Alerts: settings.Alerts{Quiet: quiet, Channels: []settings.AlertChannel{
			{Name: "ops", Kind: settings.AlertSlack, URL: slackURL + slackPath},
			{Name: "pager", Kind: settings.AlertPagerDuty, RoutingKey: routingKey, Severity: "critical", EventsURL: pdURL + "/v2/enqueue"},
			{Name: "hook", Kind: settings.AlertWebhook, URL: hookURL + "/oncall", Secret: hookSecret},
		}},
		Notify: settings.Notify{SMTP: settings.NotifySMTP{Addr: r.mail.Addr(), From: "oncehook@example.com"}},
	}
	for client, n := range map[string]int{"acme": 3, "globex": 2} {
		for i := range n {
			if _, err := r.pool.Exec(context.Background(), `INSERT INTO actions (client, environment, source, name,
					business_key, key_parts, operation_key, destination, params, param_values, params_sha256, state,
					reason, owner, max_attempts, give_up_at, next_attempt_at)
				VALUES ($1, 'live', 'stripe-live', 'open_opportunity', $2, '{}', $2, 'crm', '{}',
					action_param_values('{}'), '', 'retrying', '', 'sales@example.com', 5, now() + interval '1 day', now())`,
				client, client+"-"+string(rune('a'+i))); err != nil {
				t.Fatal(err)
			}
		}
	}
	return r
}

// run starts a Sender of the room's config until the test ends.
func (r *room) run(backoff alerts.Backoff) {
	ctx, cancel := context.WithCancel(context.Background())
	s := alerts.New(alerts.Params{Pool: r.pool, Config: r.cfg, Poll: 20 * time.Millisecond, Backoff: backoff})
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	r.t.Cleanup(func() { cancel(); <-done })
}

func (r *room) plan() ledger.AlertPlan { return ledger.AlertPlanOf(r.cfg, "crm") }

// open opens crm's breaker, as a tally that tripped does.
func (r *room) open() {
	r.t.Helper()
	if ok, err := ledger.OpenBreaker(context.Background(), r.pool, "crm", "call answered 503 (Service Unavailable)",
		settings.BreakerSettings{}, r.plan()); !ok || err != nil {
		r.t.Fatalf("open: %v %v", ok, err)
	}
}

// close closes crm's breaker by a probe that found it well.
func (r *room) close() {
	r.t.Helper()
	ctx := context.Background()
	if _, err := r.pool.Exec(ctx, `UPDATE destinations SET breaker_probe_at = now() WHERE name = 'crm'`); err != nil {
		r.t.Fatal(err)
	}
	if _, took, err := ledger.TakeBreakerProbe(ctx, r.pool, "crm", "w", time.Minute); !took || err != nil {
		r.t.Fatalf("take the probe: %v %v", took, err)
	}
	if _, ok, err := ledger.CloseBreaker(ctx, r.pool, "crm", "w", "lookup answered 200", r.plan(),
		func(*db.Queries) (int64, error) { return 0, nil }); !ok || err != nil {
		r.t.Fatalf("close: %v %v", ok, err)
	}
}

// await waits until every channel has received n alerts.
func (r *room) await(n int) {
	r.t.Helper()
	deadline := time.Now().Add(waitForAlert)
	for len(r.slack.Messages()) < n || len(r.pd.Events()) < n || len(r.hook.all()) < n || len(r.mail.Messages()) < n {
		if time.Now().After(deadline) {
			r.t.Fatalf("after %s: Slack %d, PagerDuty %d, webhook %d, mail %d alerts; want %d each", waitForAlert,
				len(r.slack.Messages()), len(r.pd.Events()), len(r.hook.all()), len(r.mail.Messages()), n)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
}

// TestOneAlertOpenedAndOneResolvedPerOutage: an outage that flaps (down, back,
// down again within the quiet time, back) is told once on every channel when
// it begins and once when it is over: one Slack message each, one PagerDuty
// trigger and one resolve with the same dedup_key (the incident resolved), one
// signed destination.down and one destination.recovered, one mail each, in
// the shapes each documents, saying how many actions of which clients wait.
func TestOneAlertOpenedAndOneResolvedPerOutage(t *testing.T) {
	t.Parallel()
	r := newRoom(t, 2*time.Second)
	r.run(alerts.DefaultBackoff)
	r.open()
	r.await(1)
	r.close()
	r.open() // within the quiet time: the same outage
	r.close()
	r.await(2)

	slack := r.slack.Messages()
	if len(slack) != 2 || !strings.HasPrefix(slack[0].Text, "crm is down since ") ||
		!strings.HasPrefix(slack[1].Text, "crm is back since ") {
		t.Fatalf("Slack messages %+v, want one down and one back", slack)
	}
	var down strings.Builder
	enc := json.NewEncoder(&down)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(slack[0].Blocks); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"*crm is down*", "5 actions wait for it (acme 3, globex 2)",
		"*Last error:* call answered 503 (Service Unavailable)", "<https://oncehook.example/destinations#dest-crm|crm in oncehook>"} {
		if !strings.Contains(down.String(), want) {
			t.Errorf("the Slack message of the outage does not say %q: %s", want, down.String())
		}
	}

	events := r.pd.Events()
	if len(events) != 2 || events[0].EventAction != "trigger" || events[1].EventAction != "resolve" ||
		events[0].DedupKey == "" || events[0].DedupKey != events[1].DedupKey {
		t.Fatalf("PagerDuty events %+v, want a trigger and a resolve with one dedup_key", events)
	}
	p := events[0].Payload
	details, _ := p["custom_details"].(map[string]any)
	byClient, _ := details["waiting_by_client"].(map[string]any)
	if p["source"] != "crm" || p["severity"] != "critical" || !strings.HasPrefix(p["summary"].(string), "crm is down since ") ||
		byClient["acme"] != float64(3) || byClient["globex"] != float64(2) || details["waiting_actions"] != float64(5) {
		t.Errorf("the trigger's payload %v", p)
	}
	if inc, ok := r.pd.Incident(events[0].DedupKey); !ok || inc.Triggers != 1 || !inc.Resolved {
		t.Errorf("the incident %+v (%v), want triggered once and resolved", inc, ok)
	}

	hooks := r.hook.all()
	if len(hooks) != 2 || hooks[0].Type != alerts.EventDestinationDown || hooks[1].Type != alerts.EventDestinationRecovered ||
		hooks[0].Data.OutageID != hooks[1].Data.OutageID || hooks[0].Data.WaitingTotal != 5 || hooks[1].Data.Until == nil {
		t.Fatalf("webhook events %+v, want one down and one recovered of one outage", hooks)
	}
	if r.hook.bad != 0 {
		t.Errorf("%d webhook requests failed their signature", r.hook.bad)
	}

	mails := r.mail.Messages()
	if len(mails) != 2 || mails[0].To[0] != "crm-admin@example.com" ||
		!strings.HasPrefix(mails[0].Subject, "oncehook: crm is down since ") || !strings.HasPrefix(mails[1].Subject, "oncehook: crm is back since ") ||
		!strings.Contains(mails[0].Body, "Waiting: 5 actions wait for it (acme 3, globex 2).") {
		t.Fatalf("mails %+v, want one down and one back to crm's owner", mails)
	}

	// Every alert sent at its first attempt (recorded just after the channel
	// took it); the recovery of the flap cancelled.
	var sent, cancelled, attempts int
	for deadline := time.Now().Add(waitForAlert); ; {
		if err := r.pool.QueryRow(context.Background(), `SELECT
			(SELECT count(*) FROM alerts WHERE state = 'sent'), (SELECT count(*) FROM alerts WHERE state = 'cancelled'),
			(SELECT count(*) FROM alert_attempts WHERE ok)`).Scan(&sent, &cancelled, &attempts); err != nil {
			t.Fatal(err)
		}
		if sent == 8 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if sent != 8 || cancelled != 4 || attempts != 8 {
		t.Errorf("%d alerts sent, %d cancelled, %d attempts; want 8, 4 (the flap's recoveries) and 8", sent, cancelled, attempts)
	}
}

// TestAChannelThatIsDownDelaysOnlyItsOwnAlerts: while Slack answers 500, the
// other channels get the outage at once; Slack's alert is tried again with
// backoff, each failed attempt recorded with why, and arrives once when Slack
// is back.
func TestAChannelThatIsDownDelaysOnlyItsOwnAlerts(t *testing.T) {
	t.Parallel()
	r := newRoom(t, time.Minute)
	r.slack.Fail(true)
	r.run(alerts.Backoff{First: 20 * time.Millisecond, Max: 100 * time.Millisecond, GiveUp: time.Hour})
	r.open()
	deadline := time.Now().Add(waitForAlert)
	for len(r.pd.Events()) < 1 || len(r.hook.all()) < 1 || len(r.mail.Messages()) < 1 || r.slack.Refused() < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("PagerDuty %d, webhook %d, mail %d alerts, Slack refused %d times", len(r.pd.Events()),
				len(r.hook.all()), len(r.mail.Messages()), r.slack.Refused())
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	// Each refusal is recorded just after Slack answers it.
	var failed int
	var why string
	for deadline := time.Now().Add(waitForAlert); ; {
		if err := r.pool.QueryRow(context.Background(), `SELECT count(*), coalesce(min(t.error), '') FROM alert_attempts t
			JOIN alerts a ON a.id = t.alert_id WHERE a.channel = 'ops' AND NOT t.ok`).Scan(&failed, &why); err != nil {
			t.Fatal(err)
		}
		if failed >= 3 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if failed < 3 || why != "Slack answered HTTP 500: rollup_error" {
		t.Fatalf("%d failed attempts of the Slack alert recorded, the first saying %q", failed, why)
	}
	if len(r.slack.Messages()) != 0 {
		t.Fatal("Slack took a message while failing")
	}
	r.slack.Fail(false)
	r.await(1)
	var state string
	for deadline := time.Now().Add(waitForAlert); state != "sent" && time.Now().Before(deadline); {
		if err := r.pool.QueryRow(context.Background(), `SELECT state FROM alerts WHERE channel = 'ops'`).Scan(&state); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if state != "sent" {
		t.Fatalf("the Slack alert is %q, want sent", state)
	}
	// Sent, it is never due again: one message.
	if n := len(r.slack.Messages()); n != 1 {
		t.Fatalf("Slack got %d messages once back, want 1", n)
	}
}
