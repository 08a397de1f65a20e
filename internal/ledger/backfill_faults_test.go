package ledger_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/backfill"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/provider"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// backfillState reads what the last pass of source recorded.
func (w *backfillWorld) backfillState(source string) (errMsg string, failures int, nextIn time.Duration) {
	w.t.Helper()
	var next time.Time
	var now time.Time
	if err := w.pool.QueryRow(context.Background(),
		`SELECT error, failures, next_at, now() FROM backfill_state WHERE source = $1`, source).Scan(&errMsg, &failures, &next, &now); err != nil {
		w.t.Fatal(err)
	}
	return errMsg, failures, next.Sub(now)
}

func TestStripeBackfillFailingAPI(t *testing.T) {
	t.Parallel()
	w := newBackfillWorld(t, nil)
	w.stripe.Add(checkoutEvent("evt_f1", "enq_f1", time.Hour))
	bf := w.backfiller("p1")
	cases := []struct {
		name       string
		fault      sandbox.StripeFault
		wantErr    string
		wantNextIn time.Duration // at least
		metric     string
	}{
		{"Unauthorized", sandbox.StripeFault{Status: 401, Times: 1}, "Stripe refused the credentials (401)", 14 * time.Minute, "unauthorized"},
		{"RateLimitedWithItsRetryTime", sandbox.StripeFault{Status: 429, RetryAfter: "120", Times: 1}, "Stripe is rate limiting (429)", 110 * time.Second, "rate_limited"},
		{"ServerError", sandbox.StripeFault{Status: 503, Times: 1}, "Stripe answered Service Unavailable (503)", 14 * time.Minute, "unavailable"},
	}
	for i, tc := range cases {
		w.stripe.Fail(tc.fault)
		r := onlyResult(t, bf.RunDue(context.Background(), true), "stripe-bf")
		if r.Err == nil || !strings.Contains(r.Err.Error(), tc.wantErr) {
			t.Errorf("%s: pass error = %v, want %q", tc.name, r.Err, tc.wantErr)
		}
		msg, failures, nextIn := w.backfillState("stripe-bf")
		if !strings.Contains(msg, tc.wantErr) || failures != i+1 || nextIn < tc.wantNextIn || tc.name == "RateLimitedWithItsRetryTime" && nextIn > 3*time.Minute {
			t.Errorf("%s: recorded %q, %d failures, next in %s", tc.name, msg, failures, nextIn)
		}
		if strings.Contains(msg, bfStripeKey) {
			t.Errorf("%s: the recorded error shows the key", tc.name)
		}
		w.metric(`oncehook_backfill_passes_total{outcome="` + tc.metric + `",source="stripe-bf"} 1`)
	}
	if n := w.count(`SELECT count(*) FROM events`); n != 0 {
		t.Errorf("%d events stored by failed passes", n)
	}
	// The next good pass clears the error and stores what was missed.
	r := onlyResult(t, bf.RunDue(context.Background(), true), "stripe-bf")
	if msg, failures, _ := w.backfillState("stripe-bf"); r.Err != nil || r.Stored != 1 || msg != "" || failures != 0 {
		t.Errorf("after recovery: %+v, recorded %q %d", r, msg, failures)
	}
}

// A provider that never answers holds up neither ingest nor other sources.
func TestStripeBackfillTimeoutNeverBlocksIngest(t *testing.T) {
	t.Parallel()
	w := newBackfillWorld(t, nil)
	hang := make(chan struct{})
	defer close(hang)
	w.stripe.Fail(sandbox.StripeFault{Status: 500, Times: 1, Hang: hang})
	src, _ := w.cfg.Source("stripe-bf")
	clients := provider.NewBackfillClients(w.cfg)
	clients["stripe-bf"] = provider.NewStripeEvents(src.Backfill.APIURL, bfStripeKey, []string{"checkout.session.completed"},
		&http.Client{Timeout: 300 * time.Millisecond})
	bf := backfill.New(backfill.Params{Pool: w.pool, Config: w.cfg, Inbox: w.inbox, Clients: clients,
		Logger: slog.New(slog.NewTextHandler(w.logs, nil)), Metrics: w.metrics, Owner: "p1"})
	done := make(chan []ledger.BackfillResult)
	go func() { done <- bf.RunDue(context.Background(), true) }()
	// While the pass waits on Stripe, webhooks are stored.
	w.webhook(checkoutEvent("evt_during", "enq_during", time.Minute))
	rs := <-done
	r := onlyResult(t, rs, "stripe-bf")
	if r.Err == nil || !strings.Contains(r.Err.Error(), "did not answer in time") {
		t.Errorf("pass error = %v, want a timeout", r.Err)
	}
	if msg, _, _ := w.backfillState("stripe-bf"); !strings.Contains(msg, "did not answer in time") {
		t.Errorf("recorded %q", msg)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = 'evt_during'`); n != 1 {
		t.Errorf("the webhook during the pass was not stored")
	}
	w.metric(`oncehook_backfill_passes_total{outcome="unavailable",source="stripe-bf"} 1`)
}

func TestGitHubBackfillRedeliversFailedDeliveries(t *testing.T) {
	t.Parallel()
	w := newBackfillWorld(t, nil)
	w.github.SetPerPage(2)
	issue := func(id int) []byte {
		return []byte(`{"action":"opened","issue":{"id":` + strings.Repeat("1", id) + `}}`)
	}
	// Delivered; missed twice (GitHub's own retry failed too); missed, then a later
	// attempt arrived; missed but stored (the reply was lost on the way back).
	if status := w.github.Deliver("guid-ok", "issues", issue(1), false); status != 200 {
		t.Fatalf("delivery: %d", status)
	}
	w.github.Deliver("guid-missed", "issues", issue(2), true)
	w.github.Deliver("guid-missed", "issues", issue(2), true)
	w.github.Deliver("guid-late", "issues", issue(3), true)
	w.github.Deliver("guid-late", "issues", issue(3), false)
	w.github.Deliver("guid-lost-reply", "issues", issue(4), false)
	w.github.Deliver("guid-lost-reply", "issues", issue(4), true) // a failed repeat of a stored one

	r := onlyResult(t, w.backfiller("p1").RunDue(context.Background(), false), "gh")
	if r.Err != nil || r.Listed != 4 || r.Missing != 1 || r.Redelivered != 1 {
		t.Fatalf("pass = %+v, want 4 deliveries listed, 1 missing, 1 redelivered", r)
	}
	for guid, want := range map[string]int{"guid-missed": 1, "guid-ok": 0, "guid-late": 0, "guid-lost-reply": 0} {
		if got := w.github.Redelivered(guid); got != want {
			t.Errorf("%s redelivered %d times, want %d", guid, got, want)
		}
	}
	// The redelivery arrived signed through POST /hooks/gh and is a webhook like any other.
	if n := w.count(`SELECT count(*) FROM events WHERE source = 'gh' AND source_event_id = 'guid-missed' AND via = 'webhook' AND type = 'issues.opened'`); n != 1 {
		t.Errorf("the redelivered event was not stored")
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source = 'gh'`); n != 4 {
		t.Errorf("%d GitHub events, want 4", n)
	}
	// The next pass sees the redelivery's success and asks for nothing.
	r = onlyResult(t, w.backfiller("p1").RunDue(context.Background(), true), "gh")
	if r.Err != nil || r.Redelivered != 0 || w.github.Redelivered("guid-missed") != 1 {
		t.Errorf("second pass = %+v; guid-missed redelivered %d times", r, w.github.Redelivered("guid-missed"))
	}
	w.metric(`oncehook_backfill_events_total{result="redelivered",source="gh"} 1`)
}

// The deliveries API of an organisation's hook and of a GitHub App's hook, the
// App's with a token and with its private key (a fresh JWT per request).
func TestGitHubBackfillHookKinds(t *testing.T) {
	t.Parallel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}))
	for _, hook := range []struct {
		name, config, base, token string
		appKey                    *rsa.PublicKey
	}{
		{"Organisation", "orgs/acme/hooks/9", "orgs/acme/hooks/9", bfGitHubTok, nil},
		{"AppWithAToken", "app", "app/hook", bfGitHubTok, nil},
		{"AppWithItsPrivateKey", "app", "app/hook", pemKey, &key.PublicKey},
	} {
		t.Run(hook.name, func(t *testing.T) {
			t.Parallel()
			w := newBackfillWorld(t, nil)
			g := &sandbox.GitHubHook{Base: hook.base, Token: bfGitHubTok, Secret: bfGitHubSec, Target: w.url + "/hooks/gh",
				AppKey: hook.appKey, AppID: "Iv1.oncehooktest"}
			srv := httptest.NewServer(g.Handler())
			t.Cleanup(srv.Close)
			guid := "guid-" + hook.name
			g.Deliver(guid, "issues", []byte(`{"action":"opened","issue":{"id":5}}`), true)
			client := provider.NewGitHubDeliveries(srv.URL, hook.token, hook.config, "Iv1.oncehooktest", http.DefaultClient)
			clients := map[string]ledger.BackfillClient{"gh": client}
			bf := backfill.New(backfill.Params{Pool: w.pool, Config: w.cfg, Inbox: w.inbox, Clients: clients, Owner: "p"})
			r := onlyResult(t, bf.RunDue(context.Background(), true), "gh")
			if r.Err != nil || r.Redelivered != 1 {
				t.Fatalf("pass = %+v", r)
			}
			if n := w.count(`SELECT count(*) FROM events WHERE source_event_id = $1`, guid); n != 1 {
				t.Errorf("redelivered event stored %d times, want 1", n)
			}
			if hook.appKey != nil {
				// A JWT from another key is refused by the same sandbox.
				other, _ := rsa.GenerateKey(rand.Reader, 2048)
				wrong := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(other)}))
				_, err := provider.NewGitHubDeliveries(srv.URL, wrong, "app", "Iv1.oncehooktest", http.DefaultClient).List(context.Background(), time.Now().Add(-time.Hour), "")
				if err == nil || !strings.Contains(err.Error(), "GitHub refused the credentials (401)") {
					t.Errorf("a JWT from another key: %v, want a 401", err)
				}
			}
		})
	}
}

// A delivery redelivered once that oncehook refused again (here: signed with a
// secret it no longer accepts) is not asked for again on every pass: the pass
// names it among the refused, for the sources page, and its failure stays in
// GitHub's log of the hook.
func TestGitHubBackfillAsksOncePerDelivery(t *testing.T) {
	t.Parallel()
	w := newBackfillWorld(t, nil)
	w.github.Deliver("guid-refused", "issues", []byte(`{"action":"opened","issue":{"id":7}}`), true)
	w.github.Secret = "a-secret-oncehook-no-longer-has" // the redelivery arrives with a bad signature
	r := onlyResult(t, w.backfiller("p1").RunDue(context.Background(), false), "gh")
	if r.Err != nil || r.Redelivered != 1 {
		t.Fatalf("first pass = %+v, want one redelivery", r)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source = 'gh'`); n != 0 {
		t.Fatalf("%d events stored from a badly signed redelivery, want 0", n)
	}
	r = onlyResult(t, w.backfiller("p1").RunDue(context.Background(), true), "gh")
	if r.Err != nil || r.Redelivered != 0 || w.github.Redelivered("guid-refused") != 1 {
		t.Errorf("second pass = %+v; guid-refused redelivered %d times, want once", r, w.github.Redelivered("guid-refused"))
	}
	if !slices.Equal(r.Refused, []string{"guid-refused"}) {
		t.Errorf("second pass refused %v, want guid-refused", r.Refused)
	}
	sts, err := review.New(w.pool, w.cfg, nil).BackfillStatuses(context.Background())
	if i := slices.IndexFunc(sts, func(s review.BackfillStatus) bool { return s.Source == "gh" }); err != nil || i < 0 ||
		sts[i].Refused != 1 || !slices.Equal(sts[i].RefusedIDs, []string{"guid-refused"}) {
		t.Errorf("sources page status %+v (%v), want guid-refused among the refused", sts, err)
	}
}

// A redelivery that never reached oncehook (here: the connection is refused while
// oncehook is down) is asked for again on the next pass, once oncehook is back,
// and the event arrives. A pass asks once per delivery.
func TestGitHubBackfillAsksAgainWhatNeverArrived(t *testing.T) {
	t.Parallel()
	w := newBackfillWorld(t, nil)
	up := w.url + "/hooks/gh"
	w.github.Deliver("guid-down", "issues", []byte(`{"action":"opened","issue":{"id":8}}`), true)
	w.github.SetTarget(refusedURL(t)) // oncehook is down
	r := onlyResult(t, w.backfiller("p1").RunDue(context.Background(), false), "gh")
	if r.Err != nil || r.Redelivered != 1 || len(r.Refused) != 0 {
		t.Fatalf("first pass = %+v, want one redelivery", r)
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source = 'gh'`); n != 0 {
		t.Fatalf("%d events while oncehook was down, want 0", n)
	}
	w.github.SetTarget(up) // back
	r = onlyResult(t, w.backfiller("p1").RunDue(context.Background(), true), "gh")
	if r.Err != nil || r.Redelivered != 1 || w.github.Redelivered("guid-down") != 2 {
		t.Fatalf("second pass = %+v; guid-down redelivered %d times, want twice", r, w.github.Redelivered("guid-down"))
	}
	if n := w.count(`SELECT count(*) FROM events WHERE source = 'gh' AND source_event_id = 'guid-down' AND via = 'webhook'`); n != 1 {
		t.Errorf("the event that never arrived was stored %d times, want once", n)
	}
	r = onlyResult(t, w.backfiller("p1").RunDue(context.Background(), true), "gh")
	if r.Err != nil || r.Redelivered != 0 {
		t.Errorf("third pass = %+v, want nothing asked once the event arrived", r)
	}
}

// refusedURL is an address where nothing listens: a connection to it is refused.
func refusedURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr + "/hooks/gh"
}
