package ledger_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/sandbox"
)

// limitsConfig has a slow destination (%[1]s) with limits of its own and a fast
// one (%[2]s) on the same events.
const limitsConfig = `
sources:
  - {name: stripe-live, client: acme, provider: stripe, environment: live, secret_env: STRIPE_WEBHOOK_SECRET}
destinations:
  - name: slow
    type: http
    create: {url: "%[1]s/opportunities"}
    reference_field: source_ref
    limits: {concurrency: 1, per_second: 50}
    timeout: 30s
  - name: fast
    type: http
    create: {url: "%[2]s/opportunities"}
    auth: {bearer_env: CRM_TOKEN}
    reference_field: source_ref
    timeout: 5s
actions:
  - {name: to_slow, source: stripe-live, on: [checkout.session.completed], key: [/data/object/metadata/enquiry_id],
     destination: slow, params: {enquiry_id: /data/object/metadata/enquiry_id}}
  - {name: to_fast, source: stripe-live, on: [checkout.session.completed], key: [/data/object/metadata/enquiry_id],
     destination: fast, params: {enquiry_id: /data/object/metadata/enquiry_id}}
`

// A slow destination with limits waits alone: while its one call hangs, the fast
// destination's actions are all confirmed through the shared slots. Without its
// limits the slow destination's calls would take every shared slot and the fast
// one would wait for it.
func TestLimitedDestinationWaitsAlone(t *testing.T) {
	t.Parallel()
	release := make(chan struct{})
	var arrived atomic.Int32
	slowCRM := sandbox.NewCRM(sandbox.CRMParams{IgnoreKeys: true})
	crm := slowCRM.Handler()
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
			return
		}
		crm.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	fastCRM := sandbox.NewCRM(sandbox.CRMParams{Token: crmToken})
	fast := httptest.NewServer(fastCRM.Handler())
	t.Cleanup(fast.Close)

	w := newConfigWorld(t, "limits.yaml", fmt.Sprintf(limitsConfig, slow.URL, fast.URL),
		map[string]string{"CRM_TOKEN": crmToken}, true, func(p *engine.Params) { p.Concurrency = 4 })
	const n = 12
	for i := range n {
		w.deliver(checkout{eventID: fmt.Sprintf("evt_%d", i), enquiry: fmt.Sprintf("enq_%d", i), amount: 100})
	}
	deadline := time.Now().Add(15 * time.Second)
	for fastCRM.Len() < n && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if got := fastCRM.Len(); got != n {
		t.Fatalf("the fast destination holds %d records while the slow one hangs, want %d\nlogs:\n%s", got, n, tail(w.logs.String(), 3000))
	}
	for i := range n {
		w.waitFor("to_fast", fmt.Sprintf("enq_%d", i), ledger.StateConfirmed)
	}
	if got := arrived.Load(); got != 1 {
		t.Errorf("%d calls reached the slow destination at once, want its concurrency of 1", got)
	}
	close(release)
	for i := range n {
		w.waitFor("to_slow", fmt.Sprintf("enq_%d", i), ledger.StateConfirmed)
	}
	if got := slowCRM.Len(); got != n {
		t.Errorf("the slow destination holds %d records, want %d", got, n)
	}
}

// A call that waits for its destination's rate and is stopped before it is sent is
// recorded as not sent, so it is retried: left to lease recovery as a started call,
// it would be reconciled and, without a lookup, go to a person though nothing
// reached the destination.
func TestRateWaitStoppedIsNotSent(t *testing.T) {
	t.Parallel()
	crm := sandbox.NewCRM(sandbox.CRMParams{IgnoreKeys: true})
	srv := httptest.NewServer(crm.Handler())
	t.Cleanup(srv.Close)
	const cfg = `
sources:
  - {name: stripe-live, client: acme, provider: stripe, environment: live, secret_env: STRIPE_WEBHOOK_SECRET}
destinations:
  - name: slow
    type: http
    create: {url: "%s/opportunities"}
    reference_field: source_ref
    limits: {per_second: 0.1}
actions:
  - {name: to_slow, source: stripe-live, on: [checkout.session.completed], key: [/data/object/metadata/enquiry_id],
     destination: slow, params: {enquiry_id: /data/object/metadata/enquiry_id}}
`
	w := newConfigWorld(t, "rate.yaml", fmt.Sprintf(cfg, srv.URL), nil, true,
		func(p *engine.Params) { p.Grace = 200 * time.Millisecond })
	w.deliver(checkout{eventID: "evt_r1", enquiry: "enq_r1"})
	w.deliver(checkout{eventID: "evt_r2", enquiry: "enq_r2"})
	deadline := time.Now().Add(15 * time.Second)
	waitingForRate := func() bool { // the first confirmed, the second's call started and waiting
		return w.count(`SELECT count(*) FROM actions WHERE state = 'confirmed'`) == 1 &&
			w.count(`SELECT count(*) FROM attempts WHERE status = 'started'`) == 1
	}
	for !waitingForRate() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // poll interval
	}
	if crm.Len() != 1 {
		t.Fatalf("the CRM holds %d records, want the first call's only (the second waits 10 s for the rate)", crm.Len())
	}
	w.stop() // the second call is still waiting for its rate
	if n := w.count(`SELECT count(*) FROM attempts WHERE status = 'started'`); n != 0 {
		t.Errorf("%d attempts left started after the stop, want 0: the waiting call was not sent", n)
	}
	waiting := 0
	for _, a := range w.actions("to_slow") {
		if a.State == ledger.StateConfirmed {
			continue
		}
		waiting++
		if a.State != ledger.StateRetrying || !strings.Contains(a.Reason, "not sent") {
			t.Errorf("the waiting action is %s (%s), want retrying: not sent", a.State, a.Reason)
		}
	}
	if waiting != 1 || crm.Len() != 1 {
		t.Errorf("%d actions waiting, %d records; want 1 and 1", waiting, crm.Len())
	}
}
