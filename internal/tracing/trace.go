// Package tracing carries a delivery's trace through the router and the performer,
// whichever process claims its work, and names the attributes of their spans and
// log lines.
package tracing

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"maps"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/oncehook/oncehook/db"
	"github.com/oncehook/oncehook/internal/telemetry"
)

// TraceparentHeader is the identity header under which an event keeps the trace
// context of the delivery that stored it, so that the router and the performer, in
// whichever process claims the work, continue that delivery's trace.
const TraceparentHeader = "Traceparent"

// Span attribute keys. Never params, bodies or secrets: the operation key is hashed.
const (
	AttrEventID      = attribute.Key("oncehook.event_id")
	AttrEventStatus  = attribute.Key("oncehook.event_status")
	AttrActionIDs    = attribute.Key("oncehook.action_ids")
	AttrActionID     = attribute.Key("oncehook.action_id")
	AttrAction       = attribute.Key("oncehook.action")
	AttrDestination  = attribute.Key("oncehook.destination")
	AttrOpKeyHash    = attribute.Key("oncehook.operation_key_hash")
	AttrOutcome      = attribute.Key("oncehook.outcome")
	AttrHTTPStatus   = attribute.Key("http.response.status_code")
	AttrAttemptCount = attribute.Key("oncehook.attempt")
)

// OperationKeyHash is the first 16 hex digits of the operation key's SHA-256: enough
// to find an action's spans and log lines, without the key, which can carry a
// customer's business identity.
func OperationKeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:8])
}

// WithTraceparent returns headers with the trace context of ctx's span added, when
// traces are on and ctx has one; otherwise headers itself.
func WithTraceparent(ctx context.Context, headers map[string]string) map[string]string {
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
	out[TraceparentHeader] = tp
	return out
}

// StoredTraceContext is ctx carrying the trace context an event was stored with, if
// any.
func StoredTraceContext(ctx context.Context, traceparent string) context.Context {
	if traceparent == "" {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, propagation.MapCarrier{"traceparent": traceparent})
}

// ActionIDs is what a log line about an action carries: its id, its operation key's
// hash and, inside a call's span, the trace id. Computed only for a line written.
func ActionIDs(ctx context.Context, a db.Action) slog.Attr {
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

// EventIDs is what a log line about an event carries: its id and, when it was stored
// while tracing, its delivery's trace id.
func EventIDs(ev db.Event) slog.Attr {
	return slog.Any("", eventLog(ev))
}

type eventLog db.Event

func (l eventLog) LogValue() slog.Value {
	attrs := []slog.Attr{slog.Int64("event_id", l.ID)}
	var headers map[string]string
	_ = json.Unmarshal(l.Headers, &headers)
	if sc := trace.SpanContextFromContext(StoredTraceContext(context.Background(), headers[TraceparentHeader])); sc.IsValid() {
		attrs = append(attrs, slog.String("trace_id", sc.TraceID().String()))
	}
	return slog.GroupValue(attrs...)
}
