package telemetry

import (
	"context"
	"strings"

	"github.com/jackc/pgx/v5"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// QueryTracer is pgx's tracer hook: a statement run inside a traced delivery, route
// or call gets a span of its own, named for the sqlc query ("postgres EventInsert").
// Statements outside a trace, and every statement while tracing is off, cost one
// check. The span carries the statement's name, never its SQL or its arguments.
type QueryTracer struct{}

type querySpanKey struct{}

// TraceQueryStart starts the statement's span under the span in ctx, if any.
func (QueryTracer) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !Enabled() || !trace.SpanFromContext(ctx).SpanContext().IsValid() {
		return ctx
	}
	name := statementName(d.SQL)
	ctx, span := Tracer().Start(ctx, "postgres "+name, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system", "postgresql"), attribute.String("db.operation.name", name)))
	return context.WithValue(ctx, querySpanKey{}, span)
}

// TraceQueryEnd ends the span TraceQueryStart started (and only that one: the
// request's own span in ctx is not this hook's to end).
func (QueryTracer) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryEndData) {
	span, ok := ctx.Value(querySpanKey{}).(trace.Span)
	if !ok {
		return
	}
	if d.Err != nil {
		span.SetStatus(codes.Error, "statement failed")
	}
	span.SetAttributes(attribute.Int64("db.rows_affected", d.CommandTag.RowsAffected()))
	span.End()
}

// statementName is the sqlc name of a query ("-- name: EventInsert :many"), or its
// first word for SQL written elsewhere (BEGIN, COMMIT, SET).
func statementName(sql string) string {
	if rest, ok := strings.CutPrefix(sql, "-- name: "); ok {
		if name, _, ok := strings.Cut(rest, " "); ok {
			return name
		}
	}
	if f := strings.Fields(sql); len(f) > 0 {
		return strings.ToUpper(f[0])
	}
	return "statement"
}
