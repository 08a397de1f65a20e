package web

import (
	"context"
	"net/http"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/internal/ledger"
	"github.com/oncehook/oncehook/internal/telemetry"
)

// startDeliverySpan starts the span of one delivery, a child of the sender's
// traceparent when it sends one, and puts it in the request's context for the inbox.
// Traces off, it returns nil and costs nothing.
func startDeliverySpan(c echo.Context, source string) trace.Span {
	if !telemetry.Enabled() {
		return nil
	}
	req := c.Request()
	ctx := otel.GetTextMapPropagator().Extract(req.Context(), propagation.HeaderCarrier(req.Header))
	ctx, span := telemetry.Tracer().Start(ctx, "oncehook.delivery", trace.WithSpanKind(trace.SpanKindServer),
		trace.WithAttributes(attribute.String("oncehook.source", source),
			attribute.String("http.route", "/hooks/:source")))
	c.SetRequest(req.WithContext(ctx))
	return span
}

// noteDeliveryID adds the provider's delivery id to the delivery's span.
func noteDeliveryID(ctx context.Context, id string) {
	if span := trace.SpanFromContext(ctx); span.IsRecording() {
		span.SetAttributes(attribute.String("oncehook.delivery_id", id))
	}
}

// endDeliverySpan ends a delivery's span with what the sender is told.
func endDeliverySpan(span trace.Span, rc ledger.Receipt, err error) {
	if span == nil {
		return
	}
	status := http.StatusOK
	if err != nil {
		status = statusOf[ledger.ErrorCode(err)]
		span.SetStatus(codes.Error, ledger.ErrorCode(err))
	} else {
		span.SetAttributes(attribute.Int64("oncehook.event_id", rc.EventID),
			attribute.Bool("oncehook.duplicate", rc.Duplicate), attribute.Bool("oncehook.stored", !rc.Duplicate),
			attribute.Bool("oncehook.conflict", rc.Conflict))
	}
	span.SetAttributes(attribute.Int("http.response.status_code", status))
	span.End()
}
