package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncehook/oncehook/internal/destination"
	"github.com/oncehook/oncehook/internal/engine"
	"github.com/oncehook/oncehook/internal/sandbox"
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/telemetry"
)

// TestLookupTrace has the CRM store a record and answer 500: the unsure attempt is
// reconciled by a lookup, and both calls are spans of the delivery's trace, each
// sending its own traceparent.
func TestLookupTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	telemetry.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	crm := sandbox.NewCRM(sandbox.CRMParams{Token: testEnv["CRM_TOKEN"]})
	crm.Fail(sandbox.Fault{Status: http.StatusInternalServerError, AfterCommit: true})
	var mu sync.Mutex
	sent := map[string]string{} // method -> traceparent
	crmSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sent[r.Method] = r.Header.Get("Traceparent")
		mu.Unlock()
		crm.Handler().ServeHTTP(w, r)
	}))
	t.Cleanup(crmSrv.Close)
	yaml := strings.Replace(testConfig, `    create: {method: POST, url: "http://127.0.0.1:1/opportunities"}`,
		`    create: {method: POST, url: "`+crmSrv.URL+`/opportunities"}
    reference_field: source_ref
    lookup: {url: "`+crmSrv.URL+`/opportunities?source_ref={ref}", reference: /source_ref, consistency: strong}`, 1)
	yaml = strings.Replace(yaml, "actions: []", `actions:
  - {name: open, source: stripe-live, on: [checkout.session.completed], key: [/data/object/metadata/enquiry_id], destination: crm, params: {enquiry: /data/object/metadata/enquiry_id}}`, 1)
	h := newHarness(t, yaml, nil)
	engine := engine.New(engine.Params{Pool: h.pool, Config: h.cfg, Clients: destination.NewClients(h.cfg),
		BackoffBase: 10 * time.Millisecond, Poll: 50 * time.Millisecond})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	const senderTrace = "5bf92f3577b34da6a3ce929d0e0e4737"
	body := stripeBody("evt_looked_up")
	hdr, err := sender.Headers("stripe", testEnv["STRIPE_SECRET"], sender.Delivery{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	hdr.Set("Traceparent", "00-"+senderTrace+"-00f067aa0ba902b8-01")
	if status, _ := h.do(http.MethodPost, "/hooks/stripe-live", hdr, body); status != 200 {
		t.Fatalf("delivery = %d, want 200", status)
	}
	spans := waitSpans(t, rec, senderTrace, "oncehook.lookup")
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	delivery, attempt, lookup := byName["oncehook.delivery"], byName["oncehook.attempt"], byName["oncehook.lookup"]
	if delivery == nil || attempt == nil {
		t.Fatalf("spans of the trace: %v; want delivery, attempt and lookup", names(spans))
	}
	checkAttrs(t, attempt, map[string]string{"oncehook.outcome": "unsure", "http.response.status_code": "500"})
	checkAttrs(t, lookup, map[string]string{"oncehook.outcome": "found", "http.response.status_code": "200",
		"oncehook.destination": "crm"})
	if lookup.Parent().SpanID() != delivery.SpanContext().SpanID() || lookup.StartTime().Before(attempt.EndTime()) {
		t.Errorf("the lookup is not the delivery's child after the attempt: parent %s", lookup.Parent().SpanID())
	}
	mu.Lock()
	if want := "00-" + senderTrace + "-" + lookup.SpanContext().SpanID().String() + "-01"; sent[http.MethodGet] != want {
		t.Errorf("the lookup sent traceparent %q, want %q", sent[http.MethodGet], want)
	}
	mu.Unlock()
	// The outcome is recorded after the lookup's span ends.
	for deadline := time.Now().Add(30 * time.Second); ; {
		var state string
		err := h.pool.QueryRow(context.Background(), `SELECT state FROM actions`).Scan(&state)
		if err == nil && state == "confirmed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("action state = %q (%v), want confirmed after the lookup found the record", state, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if crm.Len() != 1 {
		t.Errorf("the CRM holds %d records, want 1", crm.Len())
	}
}
