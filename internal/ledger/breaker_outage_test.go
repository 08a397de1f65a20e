package ledger_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/review"
)

// outage stands between oncehook and the CRM: while down it answers every
// request the way an outage does (a 503, or the connection dropped without an
// answer) and counts the requests that reached it.
type outage struct {
	down     atomic.Bool
	drop     bool // drop the connection instead of answering 503
	received atomic.Int64
}

func (o *outage) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if !o.down.Load() {
			next.ServeHTTP(rw, r)
			return
		}
		o.received.Add(1)
		if o.drop {
			if conn, _, err := rw.(http.Hijacker).Hijack(); err == nil {
				_ = conn.(*net.TCPConn).SetLinger(0) // a reset, as a dead load balancer gives
				_ = conn.Close()
			}
			return
		}
		rw.Header().Set("Content-Type", "application/json")
		rw.WriteHeader(http.StatusServiceUnavailable)
		_, _ = rw.Write([]byte(`{"error":"service unavailable"}`))
	})
}

// TestBreakerParksADeadDestination: a CRM that answers 503 (or resets every
// connection) under a stream of deliveries is called about min_calls times
// plus what was in flight, then once a wait; its actions are parked, not failed,
// and keep their budget; the overview shows one cause; once the CRM is back a
// probe closes the breaker and every operation is in the CRM's own records once.
func TestBreakerParksADeadDestination(t *testing.T) {
	t.Parallel()
	for _, drop := range []bool{false, true} {
		t.Run(map[bool]string{false: "503s", true: "ResetConnections"}[drop], func(t *testing.T) {
			t.Parallel()
			o := &outage{drop: drop}
			w := newWorld(t, worldOptions{lookup: "strong", noEngine: true, crmWrap: o.wrap})
			const minCalls = 5
			for i := range w.cfg.Destinations {
				if w.cfg.Destinations[i].Name == "crm" {
					w.cfg.Destinations[i].Breaker = ledger.BreakerSettings{MinCalls: minCalls, Window: time.Minute,
						OpenFor: 400 * time.Millisecond, MaxOpenFor: 800 * time.Millisecond}
				}
			}
			w.startEngine(0)
			ctx := context.Background()
			o.down.Store(true)
			const n = 40
			for i := range n {
				w.deliver(checkout{eventID: fmt.Sprintf("evt_out_%d", i), enquiry: fmt.Sprintf("out-%d", i), amount: 100 + i})
			}
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
			deadline := time.Now().Add(30 * time.Second)
			for probes() < 3 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond) // poll interval
			}
			if b := breaker(); !b.Parks() || probes() < 3 {
				t.Fatalf("breaker %+v after %d probes, want parking after 3\n%s", b, probes(), tail(w.logs.String(), 3000))
			}
			// What the dead CRM received: the calls in flight when the tally tripped
			// (at most the workers' concurrency), and one probe a wait.
			const concurrency = 16
			if got, bound := o.received.Load(), int64(max(minCalls, concurrency)+probes()+1); got > bound {
				t.Errorf("the dead CRM received %d requests, want at most %d", got, bound)
			}
			if f := w.count(`SELECT count(*) FROM actions WHERE state = 'failed'`); f != 0 {
				t.Errorf("%d actions failed because of the outage", f)
			}
			if p := w.count(`SELECT count(*) FROM actions WHERE destination = 'crm' AND parked_at IS NOT NULL`); p == 0 {
				t.Errorf("no action is parked")
			}
			rv := review.New(w.pool, w.cfg, nil)
			waiting, err := rv.Waiting(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var crmCauses []review.Cause
			for _, c := range waiting.Causes {
				if c.Destination == "crm" {
					crmCauses = append(crmCauses, c)
				}
			}
			if len(crmCauses) != 1 || crmCauses[0].Breaker == nil || crmCauses[0].Count != n {
				t.Fatalf("the crm's causes are %+v, want one of the breaker's with %d actions", crmCauses, n)
			}
			// The API and the metrics say it too.
			if b := apiBreaker(t, w, "crm"); b["state"] == ledger.BreakerClosed || b["parked"].(float64) == 0 || b["reason"] == "" {
				t.Errorf("the API's crm breaker while down: %v", b)
			}
			if m := metricsText(t, w); !regexp.MustCompile(`oncehook_breaker_transitions_total\{destination="crm",to="half_open"\} ([3-9]|[1-9][0-9]+)`).MatchString(m) ||
				!regexp.MustCompile(`oncehook_breaker_state\{destination="crm"\} [12]\n`).MatchString(m) {
				t.Errorf("the metrics do not show crm's breaker open:\n%s", grepLines(m, "breaker"))
			}
			o.down.Store(false)
			for _, a := range waitAll(t, w, "open_opportunity", n, ledger.StateConfirmed) {
				if c := w.crm.CountByRef(a.OperationKey); c != 1 {
					t.Errorf("%s is in the CRM %d times, want once", a.BusinessKey, c)
				}
				if a.Attempts > 4 {
					t.Errorf("%s spent %d attempts of 4", a.BusinessKey, a.Attempts)
				}
			}
			if w.crm.Len() != n {
				t.Errorf("the CRM holds %d records, want %d", w.crm.Len(), n)
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
		})
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
