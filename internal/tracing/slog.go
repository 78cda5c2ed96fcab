package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// The attributes LogHandler adds, named as OpenTelemetry's log data
// model names a record's trace context.
const (
	LogTraceID = "trace_id"
	LogSpanID  = "span_id"
)

// LogHandler wraps h so that a record logged with a context holding a
// valid span (logger.InfoContext(ctx, …) inside a request or an attempt)
// carries the span's trace_id and span_id: a log line then leads to its
// trace, and a trace to its lines. Without a span it passes the record on
// as it is, a context lookup the only cost. Attributes added under a
// group (WithGroup) land in that group, as every attribute of the record
// does.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

// logHandler is LogHandler's handler.
type logHandler struct{ next slog.Handler }

// Enabled implements slog.Handler.
func (h logHandler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h logHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx != nil {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			// A copy: the record's attributes may share their array with
			// another handler's.
			r = r.Clone()
			r.AddAttrs(slog.String(LogTraceID, sc.TraceID().String()), slog.String(LogSpanID, sc.SpanID().String()))
		}
	}
	return h.next.Handle(ctx, r)
}

// WithAttrs implements slog.Handler.
func (h logHandler) WithAttrs(as []slog.Attr) slog.Handler { return logHandler{h.next.WithAttrs(as)} }

// WithGroup implements slog.Handler.
func (h logHandler) WithGroup(name string) slog.Handler { return logHandler{h.next.WithGroup(name)} }
