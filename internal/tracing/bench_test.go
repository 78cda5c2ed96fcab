package tracing_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/tracing"
)

// benchTracers are the Tracers the micro-benchmarks compare: off (nil),
// and on with every new trace sampled or none, each through a batch
// processor (as production's) into an exporter that discards.
func benchTracers(b *testing.B) []struct {
	name string
	t    *tracing.Tracer
} {
	b.Helper()
	on := func(ratio float64) *tracing.Tracer {
		t := tracing.NewTracer(ratio, sdktrace.WithBatcher(tracetest.NewNoopExporter()))
		b.Cleanup(func() {
			if err := t.Shutdown(context.Background()); err != nil {
				b.Errorf("shutting the tracer (ratio %v) down: %v", ratio, err)
			}
		})
		return t
	}
	return []struct {
		name string
		t    *tracing.Tracer
	}{
		{"tracer=nil", nil},
		{"sample=1", on(1)},
		{"sample=0", on(0)},
	}
}

// benchInstance is an instance whose trace t decided, as the engine
// creates it (Begin); its Trace is nil when t is.
func benchInstance(t *tracing.Tracer) *weft.Instance {
	return &weft.Instance{
		ID: "i-bench", Workflow: "three", Status: weft.StatusCompleted,
		CreatedAt: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
		Trace:     t.Begin(context.Background()),
	}
}

// BenchmarkTracer measures what the engine calls of a Tracer for one
// instance, off (a nil Tracer: no work, no allocation) and on with new
// traces sampled (sample=1) or not (sample=0): Begin (an instance's
// trace, at its creation), Attempt (InInstance, InStep, Start and End: an
// attempt's span), EndStep and EndInstance (the spans emitted when a step
// execution, an instance, ends). Spans go through a batch processor into
// an exporter that discards, so that ns/op is the span maker's cost, and
// allocs/op counts the processor's goroutine's allocations too.
func BenchmarkTracer(b *testing.B) {
	ctx := context.Background()
	end := time.Date(2026, 11, 21, 12, 0, 1, 0, time.UTC)
	for _, tc := range benchTracers(b) {
		t := tc.t
		inst := benchInstance(t)
		keys := make([]string, 64) // step execution keys, as the runner's IdempotencyKey
		for i := range keys {
			keys[i] = inst.ID + "/a/" + strconv.Itoa(i)
		}
		b.Run("Begin/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if tr := t.Begin(ctx); (tr == nil) != (t == nil) {
					b.Fatalf("Begin gave trace %v with tracer %s", tr, tc.name)
				}
			}
		})
		b.Run("Attempt/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			// Built once: the Tracer's cost, not its caller's options (2
			// allocations, 32 B, that the engine does not build when its
			// Tracer is nil).
			opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindInternal)}
			i := 0
			for b.Loop() {
				actx := t.InStep(t.InInstance(ctx, inst), inst, keys[i%len(keys)])
				_, span := t.Start(actx, tracing.SpanAttempt, opts...)
				span.End()
				i++
			}
		})
		b.Run("EndStep/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				t.EndStep(ctx, inst, keys[i%len(keys)], inst.CreatedAt, end, nil)
				i++
			}
		})
		b.Run("EndInstance/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				t.EndInstance(ctx, inst, end, nil)
			}
		})
	}
}
