package tracing_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/internal/tracing"
)

// TestLogHandlerAddsTheSpan: a line logged under a span carries its trace
// and span ids; one without a span, none.
func TestLogHandlerAddsTheSpan(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewJSONHandler(&buf, nil))).With("request_id", "r1")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: trace.TraceID{0xab, 1}, SpanID: trace.SpanID{0xcd, 2}, TraceFlags: trace.FlagsSampled})
	log.InfoContext(trace.ContextWithSpanContext(context.Background(), sc), "in a span")
	log.InfoContext(context.Background(), "outside")
	log.Info("no context")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 3 {
		t.Fatalf("%d lines, want 3:\n%s", len(lines), &buf)
	}
	for i, line := range lines {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatal(err)
		}
		if m["request_id"] != "r1" {
			t.Errorf("line %d lost the logger's attributes: %s", i, line)
		}
		want := map[string]any{}
		if i == 0 {
			want = map[string]any{tracing.LogTraceID: sc.TraceID().String(), tracing.LogSpanID: sc.SpanID().String()}
		}
		for _, k := range []string{tracing.LogTraceID, tracing.LogSpanID} {
			if m[k] != want[k] {
				t.Errorf("line %d: %s = %v, want %v: %s", i, k, m[k], want[k], line)
			}
		}
	}
}
