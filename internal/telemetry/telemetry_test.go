package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/oncehook/oncehook/internal/telemetry"
)

func envOf(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// TestSetupOffUnlessConfigured runs first: Setup turns tracing on for the process.
func TestSetupOffUnlessConfigured(t *testing.T) {
	if os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" {
		t.Fatal("OTEL_EXPORTER_OTLP_ENDPOINT is set in the test's environment")
	}
	for name, env := range map[string]map[string]string{
		"NoEndpoint":  {},
		"SDKDisabled": {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_SDK_DISABLED": "true"},
		"ExporterNone": {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:1/v1/traces",
			"OTEL_TRACES_EXPORTER": "none"},
	} {
		shutdown, err := telemetry.Setup(context.Background(), envOf(env))
		if err != nil || shutdown(context.Background()) != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if telemetry.Enabled() {
		t.Error("tracing is on though no configuration asked for it")
	}
	_, err := telemetry.Setup(context.Background(), envOf(map[string]string{
		"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:1", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}))
	if err == nil || !strings.Contains(err.Error(), "http/protobuf only") {
		t.Errorf("grpc protocol: err = %v, want a plain refusal", err)
	}
}

// TestSetupExportsOverOTLPHTTP sends a span to an OTLP/HTTP receiver in the test, as
// the OTEL_* variables configure it, and reads it back from the protobuf request.
func TestSetupExportsOverOTLPHTTP(t *testing.T) {
	got := make(chan *collectortrace.ExportTraceServiceRequest, 4)
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		req := &collectortrace.ExportTraceServiceRequest{}
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || proto.Unmarshal(body, req) != nil {
			http.Error(w, "not an OTLP/HTTP trace export", http.StatusBadRequest)
			return
		}
		got <- req
		w.Header().Set("Content-Type", "application/x-protobuf")
		out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
		_, _ = w.Write(out)
	}))
	t.Cleanup(receiver.Close)
	env := map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.URL, "OTEL_SERVICE_NAME": "oncehook-test",
		"OTEL_RESOURCE_ATTRIBUTES": "deployment.environment=ci"}
	for k, v := range env { // the exporter and the resource read the process's environment
		t.Setenv(k, v)
	}
	shutdown, err := telemetry.Setup(context.Background(), envOf(env))
	if err != nil {
		t.Fatal(err)
	}
	if !telemetry.Enabled() {
		t.Fatal("Setup with an endpoint left tracing off")
	}
	_, span := telemetry.Tracer().Start(context.Background(), "oncehook.delivery")
	span.End()
	if err := shutdown(context.Background()); err != nil { // flushes the batch
		t.Fatal(err)
	}
	req := <-got
	var names, resource []string
	for _, rs := range req.ResourceSpans {
		for _, kv := range rs.Resource.Attributes {
			resource = append(resource, kv.Key+"="+kv.Value.GetStringValue())
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				names = append(names, ss.Scope.Name+" "+s.Name)
			}
		}
	}
	if strings.Join(names, ",") != telemetry.Scope+" oncehook.delivery" {
		t.Errorf("spans received = %v, want oncehook's delivery span", names)
	}
	for _, want := range []string{"service.name=oncehook-test", "deployment.environment=ci"} {
		if !strings.Contains(strings.Join(resource, " "), want) {
			t.Errorf("resource %v lacks %s", resource, want)
		}
	}
}
