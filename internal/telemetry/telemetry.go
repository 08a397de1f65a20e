// Package telemetry turns OpenTelemetry traces on from the standard OTEL_* variables,
// and tells the hot paths whether they are on: off, a span costs one atomic load.
package telemetry

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// Scope names oncehook's tracer.
const Scope = "github.com/oncehook/oncehook"

var enabled atomic.Bool

// Enabled reports whether traces are recorded; callers skip building spans otherwise.
func Enabled() bool { return enabled.Load() }

// Tracer is oncehook's tracer from the installed provider.
func Tracer() trace.Tracer { return otel.Tracer(Scope) }

// Install makes tp the process's tracer provider, with W3C trace context
// propagation, and turns tracing on. Setup calls it; tests call it with an SDK
// provider of their own.
func Install(tp trace.TracerProvider) {
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	enabled.Store(true)
}

// Setup turns traces on when OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set, unless OTEL_SDK_DISABLED=true or
// OTEL_TRACES_EXPORTER=none: spans go over OTLP/HTTP, configured by the exporter's own
// OTEL_EXPORTER_OTLP_* variables, sampled by OTEL_TRACES_SAMPLER, described by
// OTEL_SERVICE_NAME (default oncehook) and OTEL_RESOURCE_ATTRIBUTES. The returned
// shutdown flushes the spans still buffered; it does nothing when traces are off.
func Setup(ctx context.Context, getenv func(string) string) (shutdown func(context.Context) error, err error) {
	off := func(context.Context) error { return nil }
	if getenv("OTEL_EXPORTER_OTLP_ENDPOINT") == "" && getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") == "" {
		return off, nil
	}
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		return off, nil
	}
	protocol := getenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if protocol == "" {
		protocol = getenv("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if protocol != "" && protocol != "http/protobuf" {
		return nil, fmt.Errorf("OTEL_EXPORTER_OTLP_PROTOCOL=%s: oncehook exports traces over http/protobuf only", protocol)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("otlp trace exporter: %w", err)
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attribute.String("service.name", "oncehook")))
	if err != nil {
		return nil, fmt.Errorf("trace resource: %w", err)
	}
	if fromEnv, err := resource.New(ctx, resource.WithFromEnv()); err == nil {
		res, _ = resource.Merge(res, fromEnv)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	Install(tp)
	return tp.Shutdown, nil
}
