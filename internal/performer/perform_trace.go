package performer

import (
	"context"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/telemetry"
	"github.com/oncehook/oncehook/internal/tracing"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// startCallSpan starts the span of one call for an action (name oncehook.attempt or
// oncehook.lookup), a child of the delivery that asked for the action. Traces off,
// it returns ctx and a span that records nothing, without touching the database.
func (pf *Performer) startCallSpan(ctx context.Context, name string, a db.Action) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	parent := ctx
	tp, err := db.New(pf.pool).EventTraceparentOfAction(ctx,
		db.EventTraceparentOfActionParams{Client: a.Client, ActionID: a.ID})
	if err == nil {
		parent = tracing.StoredTraceContext(ctx, tp)
	}
	return telemetry.Tracer().Start(parent, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(tracing.AttrActionID.Int64(a.ID), tracing.AttrAction.String(a.Name),
			tracing.AttrDestination.String(a.Destination), tracing.AttrOpKeyHash.String(tracing.OperationKeyHash(a.OperationKey)),
			tracing.AttrAttemptCount.Int(int(a.Attempts))))
}

// endCallSpan ends a call's span with what the destination answered.
func endCallSpan(span trace.Span, observed ledger.Observation, httpStatus int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(tracing.AttrOutcome.String(observed.Code()))
	if httpStatus != 0 {
		span.SetAttributes(tracing.AttrHTTPStatus.Int(httpStatus))
	}
	switch observed {
	case ledger.ObsSuccess, ledger.ObsFound, ledger.ObsAlreadyConfirmed:
	default: // the destination's own words can quote params back: kept out of traces
		span.SetStatus(codes.Error, observed.Code())
	}
	span.End()
}

// startProbeSpan starts the span of a breaker's probe of a destination
// (oncehook.breaker.probe); the probe's call or lookup is its child.
func (pf *Performer) startProbeSpan(ctx context.Context, destination string) (context.Context, trace.Span) {
	if !telemetry.Enabled() {
		return ctx, trace.SpanFromContext(ctx)
	}
	return telemetry.Tracer().Start(ctx, "oncehook.breaker.probe", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(tracing.AttrDestination.String(destination)))
}

// endProbeSpan ends a probe's span with whether the destination was well.
func endProbeSpan(span trace.Span, h ledger.Health, answer string) {
	if !span.IsRecording() {
		return
	}
	if h != ledger.Well {
		span.SetStatus(codes.Error, "unwell")
	}
	span.End()
}
