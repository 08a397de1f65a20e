package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/telemetry"
)

// traceparentHeader is the identity header under which an event keeps the trace
// context of the delivery that stored it, so that the router and the performer, in
// whichever process claims the work, continue that delivery's trace.
const traceparentHeader = "Traceparent"

// Span attribute keys. Never params, bodies or secrets: the operation key is hashed.
const (
	attrEventID      = attribute.Key("oncehook.event_id")
	attrEventStatus  = attribute.Key("oncehook.event_status")
	attrActionIDs    = attribute.Key("oncehook.action_ids")
	attrActionID     = attribute.Key("oncehook.action_id")
	attrAction       = attribute.Key("oncehook.action")
	attrDestination  = attribute.Key("oncehook.destination")
	attrOpKeyHash    = attribute.Key("oncehook.operation_key_hash")
	attrOutcome      = attribute.Key("oncehook.outcome")
	attrHTTPStatus   = attribute.Key("http.response.status_code")
	attrAttemptCount = attribute.Key("oncehook.attempt")
)

// OperationKeyHash is the first 16 hex digits of the operation key's SHA-256: enough
// to find an action's spans and log lines, without the key, which can carry a
// customer's business identity.
func OperationKeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// withTraceparent returns headers with the trace context of ctx's span added, when
// traces are on and ctx has one; otherwise headers itself.
func withTraceparent(ctx context.Context, headers map[string]string) map[string]string {
	if !telemetry.Enabled() || !trace.SpanContextFromContext(ctx).IsValid() {
		return headers
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	tp := carrier.Get("traceparent")
	if tp == "" {
		return headers
	}
	out := make(map[string]string, len(headers)+1)
	maps.Copy(out, headers)
	out[traceparentHeader] = tp
	return out
}

// storedTraceContext is ctx carrying the trace context an event was stored with, if
// any.
func storedTraceContext(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// traceRoute records the router's span for one routed event: a child of its
// delivery's span, naming the actions the event asked for.
func traceRoute(ev db.Event, r routing) {
	if !telemetry.Enabled() {
		return
	}
	var headers map[string]string
	_ = json.Unmarshal(ev.Headers, &headers) // stored by the inbox as an object
	ctx := storedTraceContext(context.Background(), headers[traceparentHeader])
	ids := make([]int64, 0, len(r.linked))
	for _, l := range r.linked {
		ids = append(ids, l.actionID)
	}
	_, span := telemetry.Tracer().Start(ctx, "oncehook.route", trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attrEventID.Int64(ev.ID), attrEventStatus.String(r.status), attrActionIDs.Int64Slice(ids)))
	span.End()
}

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

// actionIDs is what a log line about an action carries: its id, its operation key's
// hash and, inside a call's span, the trace id. Computed only for a line written.
func actionIDs(ctx context.Context, a db.Action) slog.Attr {
	return slog.Any("", actionLog{ctx: ctx, id: a.ID, key: a.OperationKey})
}

type actionLog struct {
	ctx context.Context // may be nil
	id  int64
	key string
}

func (l actionLog) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Int64("action_id", l.id), slog.String("op_key_hash", OperationKeyHash(l.key))}
	if l.ctx != nil {
		if sc := trace.SpanContextFromContext(l.ctx); sc.IsValid() {
			attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
		}
	}
	return slog.GroupValue(attrs...)
}

// eventIDs is what a log line about an event carries: its id and, when it was stored
// while tracing, its delivery's trace id.
func eventIDs(ev db.Event) slog.Attr {
	return slog.Any("", eventLog(ev))
}

type eventLog db.Event

func (l eventLog) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Int64("event_id", l.ID)}
	var headers map[string]string
	_ = json.Unmarshal(l.Headers, &headers)
	if sc := trace.SpanContextFromContext(storedTraceContext(context.Background(), headers[traceparentHeader])); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	return slog.GroupValue(attrs...)
}
