package ledger_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/settings"
)

// outage stands between oncehook and the CRM: while down it fails every
// request the way an outage of its kind does, and counts the requests that
// reached it.
type outage struct {
	down     atomic.Bool
	up       chan struct{} // closed when the outage ends, for the calls still hanging
	kind     string        // how it fails: one of the outageKinds
	received atomic.Int64
}

// The ways a CRM is down.
const (
	down503         = "503s"              // a load balancer's 503
	downReset       = "ResetConnections"  // connections reset before any answer
	downTimeout     = "Timeouts"          // calls that hang past the client's timeout
	downAfterCommit = "CommittedInFlight" // creates committed, then the connection reset: nothing answered
)

func (o *outage) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !o.down.Load() {
			next.ServeHTTP(rw, r)
			return
		}
		o.received.Add(1)
		switch o.kind {
		case down503:
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusServiceUnavailable)
			_, _ = rw.Write([]byte(`{"error":"service unavailable"}`))
			return
		case downTimeout:
			_, _ = io.Copy(io.Discard, r.Body) // so the server sees the client hang up
			select {
			case <-r.Context().Done(): // the client gives up first
			case <-o.up:
			}
			return
		case downAfterCommit:
			if r.Method == http.MethodPost {
				next.ServeHTTP(httptest.NewRecorder(), r) // done at the CRM, never answered
			}
		}
		if conn, _, err := rw.(http.Hijacker).Hijack(); err == nil {
			_ = conn.(*net.TCPConn).SetLinger(0) // a reset, as a dead load balancer gives
			_ = conn.Close()
		}
	})
}

// twoClients adds a second client's source and rule to the CRM, beside acme's.
func twoClients(yaml string) string {
	yaml = strings.Replace(yaml, "sources:\n", "sources:\n  - {name: stripe-globex, client: globex, provider: stripe, account: acct_9, environment: live, secret_env: STRIPE_SECRET}\n", 1)
	return yaml + `  - name: open_globex
    source: stripe-globex
    on: [checkout.session.completed]
    key: [/data/object/metadata/enquiry_id]
    destination: crm
    params:
      enquiry_id: /data/object/metadata/enquiry_id
      amount: /data/object/amount_total
    retry: {attempts: 4, within: 1h}
`
}

// deliverCheckoutTo posts a checkout event as Stripe would to the named source.
func (w *world) deliverCheckoutTo(source string, c checkout) {
	w.t.Helper()
	body := c.body()
	hdr, err := sender.Headers("stripe", stripeSecret, sender.Delivery{Body: body})
	if err != nil {
		w.t.Error(err)
		return
	}
	if status, out := w.request("POST", "/hooks/"+source, hdr, body); status != http.StatusOK {
		w.t.Errorf("deliver %s to %s: status %d %v", c.eventID, source, status, out)
	}
}

// TestBreakerParksADeadDestination: a CRM taken down three ways (503s, reset
// connections, calls that time out), and one that committed the creates in
// flight before going down, under a stream of deliveries from two clients. The
// dead CRM is called about min_calls times plus what was in flight, then once a
// wait; the actions are parked, not failed, and keep their budget; the overview
// shows one cause; once the CRM is back a probe (a lookup first) closes the
// breaker and every operation is in the CRM's own records exactly once, none
// created twice.
func TestBreakerParksADeadDestination(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{down503, downReset, downTimeout, downAfterCommit} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			o := &outage{kind: kind, up: make(chan struct{})}
			endOutage := sync.OnceFunc(func() { o.down.Store(false); close(o.up) })
			t.Cleanup(endOutage)
			// Attempts to spare: with the tests' backoff of 20 ms an action
			// under load can spend a few on 503s before the tally trips.
			w := newWorld(t, worldOptions{lookup: "strong", noEngine: true, crmWrap: o.wrap, yaml: func(y string) string {
				return strings.ReplaceAll(twoClients(y), "retry: {attempts: 4, within: 1h}", "retry: {attempts: 20, within: 1h}")
			}})
			const minCalls = 5
			for i := range w.cfg.Destinations {
				if w.cfg.Destinations[i].Name == "crm" {
					w.cfg.Destinations[i].Breaker = settings.BreakerSettings{MinCalls: minCalls, Window: time.Minute,
						OpenFor: 400 * time.Millisecond, MaxOpenFor: 800 * time.Millisecond}
					w.cfg.Destinations[i].Alerts = []string{"ops"}
				}
			}
			w.cfg.Alerts = settings.Alerts{Quiet: time.Minute, Channels: []settings.AlertChannel{
				{Name: "ops", Kind: settings.AlertSlack, URL: "http://127.0.0.1:1/slack"}}}
			w.startEngine(0)
			ctx := context.Background()
			o.down.Store(true)
			// 60 deliveries a client, sent while the CRM is down: the first before
			// the breaker opens, the rest into the open breaker.
			const n = 60
			var wg sync.WaitGroup
			for _, source := range []string{"stripe-live", "stripe-globex"} {
				wg.Go(func() {
					for i := range n {
						w.deliverCheckoutTo(source, checkout{eventID: fmt.Sprintf("evt_%s_%d", source, i),
							enquiry: fmt.Sprintf("%s-%d", source, i), amount: 100 + i})
					}
				})
			}
			wg.Wait()
			q := db.New(w.pool)
			breaker := func() ledger.Breaker {
				bs, err := ledger.Breakers(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				return bs["crm"]
			}
			// Down for at least three probes' waits.
			probes := func() int {
				return w.count(`SELECT count(*) FROM breaker_transitions WHERE destination = 'crm' AND to_state = 'half_open'`)
			}
			deadline := time.Now().Add(60 * time.Second)
			for probes() < 3 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // poll interval
			}
			// Every delivery routed to its action (on Citus the router may still
			// be at the last ones).
			for w.count(`SELECT count(*) FROM actions WHERE destination = 'crm'`) < 2*n && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // poll interval
			}
			if b := breaker(); !b.Parks() || probes() < 3 {
				t.Fatalf("breaker %+v after %d probes, want parking after 3\n%s", b, probes(), tail(w.logs.String(), 3000))
			}
			// What the dead CRM received: the calls answered before the tally
			// tripped, those in flight then (at most the workers' concurrency), and
			// one probe a wait.
			const concurrency = 16
			t.Logf("the dead CRM received %d requests over %d probes", o.received.Load(), probes())
			if got, bound := o.received.Load(), int64(minCalls+concurrency+probes()); got > bound {
				t.Errorf("the dead CRM received %d requests, want at most %d", got, bound)
			}
			if f := w.count(`SELECT count(*) FROM actions WHERE state = 'failed'`); f != 0 {
				t.Errorf("%d actions failed because of the outage", f)
			}
			if p := w.count(`SELECT count(*) FROM actions WHERE destination = 'crm' AND parked_at IS NOT NULL`); p == 0 {
				t.Errorf("no action is parked")
			}
			// A probe in flight holds one action (processing, not waiting) for a
			// moment: the causes are read again until they hold every action, or
			// the deadline passes.
			rv := review.New(w.pool, w.cfg, nil)
			var crmCauses []review.Cause
			for {
				waiting, err := rv.Waiting(ctx)
				if err != nil {
					t.Fatal(err)
				}
				crmCauses = crmCauses[:0]
				for _, c := range waiting.Causes {
					if c.Destination == "crm" {
						crmCauses = append(crmCauses, c)
					}
				}
				if len(crmCauses) == 1 && crmCauses[0].Count == 2*n || time.Now().After(deadline) {
					break
				}
				time.Sleep(20 * time.Millisecond) // poll interval
			}
			if len(crmCauses) != 1 || crmCauses[0].Breaker == nil || crmCauses[0].Count != 2*n {
				t.Fatalf("the crm's causes are %+v, want one of the breaker's with %d actions", crmCauses, 2*n)
			}
			// The action's page and the API say each one is parked, and why.
			var parkedID int64
			if err := w.pool.QueryRow(ctx, `SELECT id FROM actions WHERE parked_at IS NOT NULL AND client = 'acme'
				AND state IN ('pending', 'retrying', 'uncertain') ORDER BY id DESC LIMIT 1`).Scan(&parkedID); err != nil {
				t.Fatal(err)
			}
			if step, _ := w.detail(fmt.Sprint(parkedID))["next_step"].(string); !strings.HasPrefix(step, "Parked: crm down since ") {
				t.Errorf("a parked action's next step: %q", step)
			}
			// The API and the metrics say it too.
			if b := apiBreaker(t, w, "crm"); b["state"] == ledger.BreakerClosed || b["parked"].(float64) == 0 || b["reason"] == "" {
				t.Errorf("the API's crm breaker while down: %v", b)
			}
			if m := metricsText(t, w); !regexp.MustCompile(`oncehook_breaker_transitions_total\{destination="crm",to="half_open"\} ([3-9]|[1-9][0-9]+)`).MatchString(m) ||
				!regexp.MustCompile(`oncehook_breaker_state\{destination="crm"\} [12]\n`).MatchString(m) {
				t.Errorf("the metrics do not show crm's breaker open:\n%s", grepLines(m, "breaker"))
			}
			endOutage()
			for _, name := range []string{"open_opportunity", "open_globex"} {
				for _, a := range waitAll(t, w, name, n, ledger.StateConfirmed) {
					if c := w.crm.CountByRef(a.OperationKey); c != 1 {
						t.Errorf("%s is in the CRM %d times, want once", a.BusinessKey, c)
					}
					if a.Attempts > 4 {
						t.Errorf("%s spent %d attempts of 4", a.BusinessKey, a.Attempts)
					}
				}
			}
			if w.crm.Len() != 2*n {
				t.Errorf("the CRM holds %d records, want %d", w.crm.Len(), 2*n)
			}
			if kind == downAfterCommit {
				// What the CRM had done was found by a lookup, never created again.
				creates := map[string]int{}
				for _, c := range w.crm.Creates() {
					creates[c.Ref]++
				}
				for ref, k := range creates {
					if k != 1 {
						t.Errorf("%s was sent to the CRM's create %d times, want once", ref, k)
					}
				}
				if found := w.count(`SELECT count(*) FROM attempts WHERE kind = 'lookup' AND observed = $1`, string(ledger.ObsFound)); found == 0 {
					t.Errorf("no lookup found a create the CRM committed while down")
				}
			}
			waitAll(t, w, "send_welcome_email", n, ledger.StateConfirmed)
			if b := breaker(); b.State != ledger.BreakerClosed || b.LastProbe == "" {
				t.Errorf("breaker %+v once the CRM is back, want closed by a probe", b)
			}
			if p := w.count(`SELECT count(*) FROM actions WHERE parked_at IS NOT NULL`); p != 0 {
				t.Errorf("%d actions are still parked", p)
			}
			if b := apiBreaker(t, w, "crm"); b["state"] != ledger.BreakerClosed || b["last_probe"] == "" {
				t.Errorf("the API's crm breaker once back: %v", b)
			}
			if m := metricsText(t, w); !strings.Contains(m, `oncehook_breaker_state{destination="crm"} 0`) ||
				!strings.Contains(m, `oncehook_breaker_transitions_total{destination="crm",to="closed"} 1`) {
				t.Errorf("the metrics do not show crm's breaker closed once:\n%s", grepLines(m, "breaker"))
			}
			// One outage, told once when it began and once when it was over.
			if n := w.count(`SELECT count(*) FROM outages WHERE destination = 'crm' AND closed_at IS NOT NULL`); n != 1 {
				t.Errorf("%d outages of crm recorded over, want 1", n)
			}
			if n := w.count(`SELECT count(*) FROM alerts WHERE destination = 'crm' AND channel = 'ops' AND state <> 'cancelled'`); n != 2 {
				t.Errorf("%d alerts of crm's outage to its channel, want 2 (down, recovered)", n)
			}
		})
	}
}

// TestBreakerOpeningBeforeTheCallGivesTheAttemptBack: calls claimed while the
// CRM's breaker was closed, then held by its rate limit while the breaker opens,
// never go out; the attempt their claim counted is given back, so the outage
// spends none of their budget, and the CRM holds only what was sent.
func TestBreakerOpeningBeforeTheCallGivesTheAttemptBack(t *testing.T) {
	t.Parallel()
	w := newWorld(t, worldOptions{noEngine: true,
		crmExtra: "    limits: {per_second: 0.25}\n    breaker: {open_for: 1h, max_open_for: 2h}"})
	w.startEngine(0)
	ctx := context.Background()
	const n = 3 // one call goes out at once, the others wait 4 s and 8 s for the rate
	for i := range n {
		w.deliver(checkout{eventID: fmt.Sprintf("evt_rate_%d", i), enquiry: fmt.Sprintf("enq-rate-%d", i), amount: 100})
	}
	// The first create recorded, the others claimed and waiting for the rate.
	inState := func(state string) int {
		return w.count(`SELECT count(*) FROM actions WHERE name = 'open_opportunity' AND state = $1`, state)
	}
	deadline := time.Now().Add(30 * time.Second)
	for (inState(ledger.StateConfirmed) == 0 || inState(ledger.StateProcessing) < n-1) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if c, p := inState(ledger.StateConfirmed), inState(ledger.StateProcessing); w.crm.Len() != 1 || c != 1 || p != n-1 {
		t.Fatalf("the CRM holds %d records, %d creates are confirmed and %d wait for the rate, want 1, 1 and %d\n%s",
			w.crm.Len(), c, p, n-1, tail(w.logs.String(), 3000))
	}
	if ok, err := ledger.OpenBreaker(ctx, w.pool, "crm", "opened for the test", settings.BreakerSettings{}, ledger.AlertPlan{}); !ok || err != nil {
		t.Fatalf("open the breaker: %v %v", ok, err)
	}
	// Every other create is parked, whether its call had been claimed or not.
	parked := func() int {
		return w.count(`SELECT count(*) FROM actions WHERE name = 'open_opportunity' AND parked_at IS NOT NULL
			AND state IN ('pending', 'retrying')`)
	}
	for parked() < n-1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond) // poll interval
	}
	if p := parked(); p != n-1 {
		t.Fatalf("%d creates parked, want %d\n%s", p, n-1, tail(w.logs.String(), 3000))
	}
	if notSent := w.count(`SELECT count(*) FROM attempts WHERE error LIKE 'not sent: its destination''s breaker opened%'`); notSent != n-1 {
		t.Fatalf("%d claimed calls were held back by the breaker, want %d\n%s", notSent, n-1, tail(w.logs.String(), 3000))
	}
	for _, a := range w.actions("open_opportunity") {
		if a.State == ledger.StateConfirmed {
			continue
		}
		if a.Attempts != 0 {
			t.Errorf("%s, parked and never sent, spent %d attempts", a.BusinessKey, a.Attempts)
		}
	}
	if w.crm.Len() != 1 || len(w.crm.Creates()) != 1 {
		t.Errorf("the CRM holds %d records from %d creates, want the first call's only", w.crm.Len(), len(w.crm.Creates()))
	}
}

// TestBreakerStaysClosedOnRejections: a storm of 422s (every request refused
// for what it says) is the destination answering, not an outage: the breaker
// never opens, each action is called once and failed for a person.
func TestBreakerStaysClosedOnRejections(t *testing.T) {
	t.Parallel()
	var calls atomic.Int64
	w := newWorld(t, worldOptions{lookup: "strong", noEngine: true, crmWrap: func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			calls.Add(1)
			rw.Header().Set("Content-Type", "application/json")
			rw.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = rw.Write([]byte(`{"error":"amount must be positive"}`))
		})
	}})
	for i := range w.cfg.Destinations {
		if w.cfg.Destinations[i].Name == "crm" {
			w.cfg.Destinations[i].Breaker = settings.BreakerSettings{MinCalls: 5, Window: time.Minute, OpenFor: time.Second}
		}
	}
	w.startEngine(0)
	const n = 30
	for i := range n {
		w.deliver(checkout{eventID: fmt.Sprintf("evt_422_%d", i), enquiry: fmt.Sprintf("rej-%d", i), amount: -1})
	}
	for _, a := range waitAll(t, w, "open_opportunity", n, ledger.StateFailed) {
		if a.Attempts != 1 {
			t.Errorf("%s was called %d times, want once", a.BusinessKey, a.Attempts)
		}
	}
	if got := calls.Load(); got != n {
		t.Errorf("the CRM received %d calls, want %d", got, n)
	}
	if k := w.count(`SELECT count(*) FROM breaker_transitions`); k != 0 {
		t.Errorf("the breaker changed %d times on rejections", k)
	}
}

// waitAll polls until n actions named name are in state want, and returns them.
func waitAll(t *testing.T, w *world, name string, n int, want string) []action {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var last []action
	for time.Now().Before(deadline) {
		last = w.actions(name)
		done := 0
		for _, a := range last {
			if a.State == want {
				done++
			}
		}
		if done == n && len(last) == n {
			return last
		}
		time.Sleep(50 * time.Millisecond) // poll interval
	}
	t.Fatalf("%s: not all %d became %s; last seen %+v\nlogs:\n%s", name, n, want, last, tail(w.logs.String(), 4000))
	return nil
}

// apiBreaker is the named destination's breaker as GET /api/v1/destinations shows it.
func apiBreaker(t *testing.T, w *world, name string) map[string]any {
	t.Helper()
	status, out := w.api(w.admin, "GET", "/destinations", nil)
	if status != http.StatusOK {
		t.Fatalf("destinations: %d %v", status, out)
	}
	for _, d := range out["destinations"].([]any) {
		if m := d.(map[string]any); m["name"] == name {
			return m["breaker"].(map[string]any)
		}
	}
	t.Fatalf("no destination %s in %v", name, out)
	return nil
}

// metricsText is what /metrics serves.
func metricsText(t *testing.T, w *world) string {
	t.Helper()
	res, err := http.Get(w.url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// grepLines keeps the lines of s that hold word.
func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
