package ledger_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/alerts"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/settings"
)

const (
	oncallSlackPath = "/services/T0ONCEHOOK/B0OUTAGE01/abcdefghijklmnopqrstuvwx"
	oncallRouting   = "0123456789abcdef0123456789ABCDEF" // 32 characters, as PagerDuty's
	oncallSecret    = "whsec_b25jYWxsLXNlY3JldA=="
)

// oncallHook is the on-call team's webhook receiver: it verifies each alert as
// a Standard Webhooks receiver does and keeps its type and outage.
type oncallHook struct {
	mu    sync.Mutex
	types []string
	ids   []int64
	bad   int
}

func (o *oncallHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	_, err := provider.Verify(provider.VerifyParams{Provider: ledger.ProviderStandardWebhooks,
		Secrets: []string{oncallSecret}, Now: time.Now(), Header: r.Header, Body: body})
	var ev alerts.WebhookEvent
	if err == nil {
		err = json.Unmarshal(body, &ev)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if err != nil {
		o.bad++
		http.Error(w, err.Error(), http.StatusUnauthorized)
		return
	}
	o.types = append(o.types, ev.Type)
	o.ids = append(o.ids, ev.Data.OutageID)
}

func (o *oncallHook) seen() ([]string, []int64, int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.types...), append([]int64(nil), o.ids...), o.bad
}

// outageDownFor is how long each down period of TestOutageAlertsOnceUnderAStream
// lasts: 8 s, or ONCEHOOK_TEST_OUTAGE (say 2m) for a long one.
func outageDownFor(t *testing.T) time.Duration {
	if s := os.Getenv("ONCEHOOK_TEST_OUTAGE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("ONCEHOOK_TEST_OUTAGE: %v", err)
		}
		return d
	}
	return 8 * time.Second
}

// TestOutageAlertsOnceUnderAStream: the CRM goes down under a stream of 200
// deliveries from two clients, comes back for a few seconds, goes down again
// (within the quiet time: flapping) and comes back. The breaker opens, probes
// many times, closes, opens again and closes; the on-call channels hear of one
// outage: one Slack message when it began and one when it was over, one
// PagerDuty trigger and one resolve with one dedup_key, one signed
// destination.down and one destination.recovered, one mail to the owner each,
// and every action is done once.
func TestOutageAlertsOnceUnderAStream(t *testing.T) {
	t.Parallel()
	o := &outage{kind: down503, up: make(chan struct{})}
	t.Cleanup(sync.OnceFunc(func() { o.down.Store(false); close(o.up) }))
	// The actions have attempts to spare: a rate over a window counts the
	// successes of the up period too, and the second down period spends some
	// attempts before the breaker opens again.
	w := newWorld(t, worldOptions{lookup: "strong", noEngine: true, crmWrap: o.wrap, yaml: func(y string) string {
		return strings.ReplaceAll(twoClients(y), "retry: {attempts: 4, within: 1h}", "retry: {attempts: 50, within: 1h}")
	}})
	slack, pd, hook := sandbox.NewSlack(oncallSlackPath), sandbox.NewPagerDuty(oncallRouting), &oncallHook{}
	serve := func(h http.Handler) string {
		srv := httptest.NewServer(h)
		t.Cleanup(srv.Close)
		return srv.URL
	}
	ownerMail, err := sandbox.StartMail("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ownerMail.Close)
	downFor := outageDownFor(t)
	w.cfg.Alerts = settings.Alerts{Quiet: 10 * time.Second, Channels: []settings.AlertChannel{
		{Name: "ops", Kind: settings.AlertSlack, URL: serve(slack) + oncallSlackPath},
		{Name: "pager", Kind: settings.AlertPagerDuty, RoutingKey: oncallRouting, Severity: "error",
			EventsURL: serve(pd) + "/v2/enqueue"},
		{Name: "hook", Kind: settings.AlertWebhook, URL: serve(hook) + "/oncall", Secret: oncallSecret},
	}}
	w.cfg.Notify.SMTP = settings.NotifySMTP{Addr: ownerMail.Addr(), From: "oncehook@example.com"}
	for i := range w.cfg.Destinations {
		if d := &w.cfg.Destinations[i]; d.Name == "crm" {
			d.Breaker = settings.BreakerSettings{MinCalls: 5, Window: 2 * time.Second,
				OpenFor: 400 * time.Millisecond, MaxOpenFor: 800 * time.Millisecond}
			d.Alerts = []string{"ops", "pager", "hook", settings.AlertOwnerMail}
		}
	}
	w.startEngine(0)
	// The sender of the outages' alerts, as every server and worker runs one.
	ctx, cancel := context.WithCancel(context.Background())
	sent := make(chan struct{})
	go func() {
		alerts.New(alerts.Params{Pool: w.pool, Config: w.cfg, Poll: 50 * time.Millisecond}).Run(ctx)
		close(sent)
	}()
	t.Cleanup(func() { cancel(); <-sent })

	// 100 deliveries a client, spread over the two down periods and the up
	// one between them.
	const n = 100
	o.down.Store(true)
	var wg sync.WaitGroup
	pace := (2*downFor + 3*time.Second) / n
	for _, source := range []string{"stripe-live", "stripe-globex"} {
		wg.Go(func() {
			for i := range n {
				w.deliverCheckoutTo(source, checkout{eventID: fmt.Sprintf("evt_%s_%d", source, i),
					enquiry: fmt.Sprintf("%s-%d", source, i), amount: 100 + i})
				time.Sleep(pace) // the stream's pace, part of the scenario
			}
		})
	}
	time.Sleep(downFor) // down
	o.down.Store(false)
	closedOnce := time.Now().Add(30 * time.Second)
	for w.count(`SELECT count(*) FROM breaker_transitions WHERE destination = 'crm' AND to_state = 'closed'`) == 0 {
		if time.Now().After(closedOnce) {
			t.Fatalf("the breaker did not close once the CRM was back\n%s", tail(w.logs.String(), 3000))
		}
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	time.Sleep(3 * time.Second) // up for a few seconds
	o.down.Store(true)
	time.Sleep(downFor) // down again, within the quiet time of the close
	o.down.Store(false)
	wg.Wait()
	waitAll(t, w, "open_opportunity", n, ledger.StateConfirmed)
	waitAll(t, w, "open_globex", n, ledger.StateConfirmed)

	// Once the quiet time has passed since the last close, the recovery is told.
	deadline := time.Now().Add(time.Minute)
	for w.count(`SELECT count(*) FROM alerts WHERE state = 'sent'`) < 8 {
		if time.Now().After(deadline) {
			t.Fatalf("alerts sent: %d of 8\n%s", w.count(`SELECT count(*) FROM alerts WHERE state = 'sent'`),
				tail(w.logs.String(), 3000))
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	if opens := w.count(`SELECT count(*) FROM breaker_transitions WHERE destination = 'crm' AND from_state = 'closed'`); opens < 2 {
		t.Fatalf("the breaker opened %d times from closed, want 2 (the outage and its flap)", opens)
	}
	if n := w.count(`SELECT count(*) FROM outages`); n != 1 {
		t.Errorf("%d outages, want 1: the second opening came within the quiet time", n)
	}
	t.Logf("the breaker changed %d times; one outage, reopened %d times",
		w.count(`SELECT count(*) FROM breaker_transitions`), w.count(`SELECT reopened FROM outages`))

	msgs := slack.Messages()
	if len(msgs) != 2 || !strings.HasPrefix(msgs[0].Text, "crm is down since ") || !strings.HasPrefix(msgs[1].Text, "crm is back since ") {
		t.Errorf("Slack messages %+v, want one down, one back", msgs)
	}
	events := pd.Events()
	if len(events) != 2 || events[0].EventAction != "trigger" || events[1].EventAction != "resolve" ||
		events[0].DedupKey != events[1].DedupKey {
		t.Errorf("PagerDuty events %+v, want a trigger and a resolve with one dedup_key", events)
	} else if inc, _ := pd.Incident(events[0].DedupKey); inc.Triggers != 1 || !inc.Resolved {
		t.Errorf("the PagerDuty incident %+v, want triggered once and resolved", inc)
	}
	types, ids, bad := hook.seen()
	if len(types) != 2 || types[0] != alerts.EventDestinationDown || types[1] != alerts.EventDestinationRecovered ||
		ids[0] != ids[1] || bad != 0 {
		t.Errorf("webhook events %v of outages %v (%d bad signatures), want down and recovered of one", types, ids, bad)
	}
	if mails := ownerMail.Messages(); len(mails) != 2 || mails[0].To[0] != "crm-admin@example.com" {
		t.Errorf("owner mails %+v, want 2 to crm-admin@example.com", mails)
	}
	// Each action done once at the CRM.
	creates := map[string]int{}
	for _, c := range w.crm.Creates() {
		creates[c.Ref]++
	}
	for ref, k := range creates {
		if k != 1 {
			t.Errorf("%s was created %d times", ref, k)
		}
	}
	if len(creates) != 2*n {
		t.Errorf("the CRM created %d records, want %d", len(creates), 2*n)
	}
}
