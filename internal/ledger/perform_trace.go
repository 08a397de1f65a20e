package ledger

import (
	"context"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/telemetry"
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
		parent = storedTraceContext(ctx, tp)
	}
	return telemetry.Tracer().Start(parent, name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attrActionID.Int64(a.ID), attrAction.String(a.Name),
			attrDestination.String(a.Destination), attrOpKeyHash.String(OperationKeyHash(a.OperationKey)),
			attrAttemptCount.Int(int(a.Attempts))))
}

// endCallSpan ends a call's span with what the destination answered.
func endCallSpan(span trace.Span, observed Observation, httpStatus int) {
	if !span.IsRecording() {
		return
	}
	span.SetAttributes(attrOutcome.String(observed.Code()))
	if httpStatus != 0 {
		span.SetAttributes(attrHTTPStatus.Int(httpStatus))
	}
	switch observed {
	case ObsSuccess, ObsFound, ObsAlreadyConfirmed:
	default: // the destination's own words can quote params back: kept out of traces
		span.SetStatus(codes.Error, observed.Code())
	}
	span.End()
}
