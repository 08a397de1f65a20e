package web_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
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
	"github.com/oncehook/oncehook/internal/sender"
	"github.com/oncehook/oncehook/internal/telemetry"
	"github.com/oncehook/oncehook/internal/tracing"
)

// recordingCRM is a destination that keeps each request's traceparent and body.
type recordingCRM struct {
	mu    sync.Mutex
	calls []struct{ traceparent, body string }
}

func (c *recordingCRM) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b := make([]byte, r.ContentLength)
	_, _ = r.Body.Read(b)
	c.mu.Lock()
	c.calls = append(c.calls, struct{ traceparent, body string }{r.Header.Get("Traceparent"), string(b)})
	c.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprint(w, `{"id":"rec_1"}`)
}

// TestDeliveryTrace follows one delivery with a sender's traceparent through the
// real server, router and performer to an HTTP destination, and checks its trace:
// delivery (a child of the sender's span), route (naming the action), attempt, and the
// traceparent the destination received, all in one trace, in that order.
func TestDeliveryTrace(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	telemetry.Install(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	crm := &recordingCRM{}
	crmSrv := httptest.NewServer(crm)
	t.Cleanup(crmSrv.Close)
	yaml := strings.Replace(testConfig, "http://127.0.0.1:1/opportunities", crmSrv.URL+"/opportunities", 1)
	yaml = strings.Replace(yaml, "actions: []", `actions:
  - {name: open, source: stripe-live, on: [checkout.session.completed], key: [/data/object/metadata/enquiry_id], destination: crm, params: {enquiry: /data/object/metadata/enquiry_id}}`, 1)
	h := newHarness(t, yaml, nil)
	logs := &lockedWriter{w: &bytes.Buffer{}}
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	engine := engine.New(engine.Params{Pool: h.pool, Config: h.cfg, Clients: destination.NewClients(h.cfg), Logger: logger})
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- engine.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })

	const senderTrace, senderSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	body := stripeBody("evt_traced")
	hdr, err := sender.Headers("stripe", testEnv["STRIPE_SECRET"], sender.Delivery{Body: body})
	if err != nil {
		t.Fatal(err)
	}
	hdr.Set("Traceparent", "00-"+senderTrace+"-"+senderSpan+"-01")
	if status, _ := h.do(http.MethodPost, "/hooks/stripe-live", hdr, body); status != 200 {
		t.Fatalf("delivery = %d, want 200", status)
	}
	spans := waitSpans(t, rec, senderTrace, "oncehook.attempt")
	byName := map[string]sdktrace.ReadOnlySpan{}
	for _, s := range spans {
		byName[s.Name()] = s
	}
	delivery, route, attempt := byName["oncehook.delivery"], byName["oncehook.route"], byName["oncehook.attempt"]
	if delivery == nil || route == nil || attempt == nil {
		t.Fatalf("spans of the trace: %v; want delivery, route and attempt", names(spans))
	}
	if delivery.Parent().SpanID().String() != senderSpan {
		t.Errorf("delivery's parent = %s, want the sender's span %s", delivery.Parent().SpanID(), senderSpan)
	}
	for _, s := range []sdktrace.ReadOnlySpan{route, attempt} {
		if s.Parent().SpanID() != delivery.SpanContext().SpanID() {
			t.Errorf("%s's parent = %s, want the delivery's span", s.Name(), s.Parent().SpanID())
		}
	}
	if !(!route.StartTime().Before(delivery.StartTime()) && !attempt.StartTime().Before(route.StartTime())) {
		t.Errorf("spans out of order: delivery %v, route %v, attempt %v", delivery.StartTime(), route.StartTime(), attempt.StartTime())
	}

	var eventID, actionID int64
	var opKey, state, traceparent string
	err = h.pool.QueryRow(context.Background(), `SELECT e.id, a.id, a.operation_key, a.state, e.headers->>'Traceparent'
		FROM `+eventsRead+` e JOIN action_events ae ON ae.client = e.client AND ae.event_id = e.id
		JOIN actions a ON a.client = ae.client AND a.id = ae.action_id
		WHERE e.source_event_id = 'evt_traced'`).Scan(&eventID, &actionID, &opKey, &state, &traceparent)
	if err != nil {
		t.Fatal(err)
	}
	if want := "00-" + senderTrace + "-" + delivery.SpanContext().SpanID().String() + "-01"; traceparent != want {
		t.Errorf("stored traceparent = %q, want the delivery span's %q", traceparent, want)
	}
	checkAttrs(t, delivery, map[string]string{"oncehook.source": "stripe-live", "oncehook.delivery_id": "evt_traced",
		"oncehook.stored": "true", "oncehook.duplicate": "false", "http.response.status_code": "200",
		"oncehook.event_id": fmt.Sprint(eventID)})
	checkAttrs(t, route, map[string]string{"oncehook.event_id": fmt.Sprint(eventID),
		"oncehook.action_ids": fmt.Sprintf("[%d]", actionID), "oncehook.event_status": "routed"})
	checkAttrs(t, attempt, map[string]string{"oncehook.destination": "crm", "oncehook.action_id": fmt.Sprint(actionID),
		"oncehook.operation_key_hash": tracing.OperationKeyHash(opKey), "oncehook.outcome": "success",
		"http.response.status_code": "200"})
	for _, s := range spans {
		for _, kv := range s.Attributes() {
			if v := kv.Value.Emit(); strings.Contains(v, "enq_1") || strings.Contains(v, opKey) || strings.Contains(v, testEnv["CRM_TOKEN"]) {
				t.Errorf("%s carries a param, the operation key or a secret: %s=%s", s.Name(), kv.Key, v)
			}
		}
	}
	checkCallLogged(t, logs.String(), actionID, tracing.OperationKeyHash(opKey), senderTrace)
	crm.mu.Lock()
	defer crm.mu.Unlock()
	if len(crm.calls) != 1 || !strings.Contains(crm.calls[0].body, "enq_1") {
		t.Fatalf("the CRM got %+v, want one create with the enquiry", crm.calls)
	}
	if want := "00-" + senderTrace + "-" + attempt.SpanContext().SpanID().String() + "-01"; crm.calls[0].traceparent != want {
		t.Errorf("the CRM got traceparent %q, want the attempt's %q", crm.calls[0].traceparent, want)
	}
}

// waitSpans returns the ended spans of a trace once one is named last.
func waitSpans(t *testing.T, rec *tracetest.SpanRecorder, traceID, last string) []sdktrace.ReadOnlySpan {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var spans []sdktrace.ReadOnlySpan
		found := false
		for _, s := range rec.Ended() {
			if s.SpanContext().TraceID().String() == traceID {
				spans = append(spans, s)
				found = found || s.Name() == last
			}
		}
		if found {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s span in trace %s within 30s; spans: %v", last, traceID, names(spans))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func names(spans []sdktrace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}

func checkAttrs(t *testing.T, s sdktrace.ReadOnlySpan, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, kv := range s.Attributes() {
		got[string(kv.Key)] = kv.Value.Emit()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %s = %q, want %q", s.Name(), k, got[k], v)
		}
	}
}

// checkCallLogged checks that the JSON line about the call carries the action's ids
// and its trace id.
func checkCallLogged(t *testing.T, logs string, actionID int64, opKeyHash, traceID string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var v struct {
			Msg       string  `json:"msg"`
			ActionID  float64 `json:"action_id"`
			OpKeyHash string  `json:"op_key_hash"`
			TraceID   string  `json:"trace_id"`
		}
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("a log line is not JSON: %s", line)
		}
		if v.Msg != "destination called" {
			continue
		}
		if int64(v.ActionID) != actionID || v.OpKeyHash != opKeyHash || v.TraceID != traceID {
			t.Errorf("the call's line = %s; want action_id %d, op_key_hash %s, trace_id %s", line, actionID, opKeyHash, traceID)
		}
		return
	}
	t.Errorf("no \"destination called\" line in:\n%s", logs)
}
