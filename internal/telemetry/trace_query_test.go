package telemetry_test

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/db/dbtest"
	"github.com/oncehook/oncehook/internal/telemetry"
)

func TestMain(m *testing.M) { dbtest.Main(m) }

// TestStatementsInATraceGetSpans: the pool db.Open makes records a span for each
// statement run under a span, named for its sqlc query, and none for statements
// outside a trace. It runs after TestSetupOffUnlessConfigured (file order), since it
// turns tracing on for the process.
func TestStatementsInATraceGetSpans(t *testing.T) {
	_, dsn := dbtest.NewDSN(t)
	ctx := context.Background()
	pool, err := db.Open(ctx, dsn, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	telemetry.Install(tp)

	if _, err := db.New(pool).MetricsOpenActions(ctx); err != nil { // no trace: no span
		t.Fatal(err)
	}
	traced, root := tp.Tracer("test").Start(ctx, "delivery")
	if _, err := db.New(pool).MetricsOpenActions(traced); err != nil {
		t.Fatal(err)
	}
	root.End()

	got := spans.GetSpans()
	if len(got) != 2 {
		t.Fatalf("recorded %d spans, want the delivery and its one statement: %v", len(got), got)
	}
	q := got[0]
	if q.Name != "postgres MetricsOpenActions" || q.Parent.SpanID() != root.SpanContext().SpanID() {
		t.Errorf("statement span %q under %s, want postgres MetricsOpenActions under the delivery %s",
			q.Name, q.Parent.SpanID(), root.SpanContext().SpanID())
	}
	for _, a := range q.Attributes {
		if strings.Contains(a.Value.Emit(), "SELECT") {
			t.Errorf("the span carries the statement's SQL in %s", a.Key)
		}
	}
}
