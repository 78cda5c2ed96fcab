package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/tracing"
)

// TestTracingOffAllocatesNothing: with tracing off (a nil Config.Tracer),
// and with tracing on for an instance created without a trace (before
// tracing was turned on), every tracing path of a turn, an attempt, a
// step's and an instance's end allocates nothing: tracing off costs the
// engine a nil check. (BenchmarkTracing, in tracing_bench_test.go, shows
// what tracing on costs a workflow.)
func TestTracingOffAllocatesNothing(t *testing.T) {
	on := tracing.NewTracer(1, sdktrace.WithBatcher(tracetest.NewNoopExporter()))
	t.Cleanup(func() {
		if err := on.Shutdown(context.Background()); err != nil {
			t.Errorf("shutting the tracer down: %v", err)
		}
	})
	ctx := context.Background()
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	inv := runner.Invoke{
		Token: "t1", StepID: "a", Plugin: "kit", Activity: "echo", Attempt: 1, IdempotencyKey: "i1/a/e1",
	}
	// The runner's inputs are interfaces already when the engine ends an
	// attempt with them: converted here, out of the measured function.
	completed := runner.Input(runner.ActivityCompleted{Token: "t1"})
	failed := runner.Input(runner.ActivityFailed{Token: "t1", Cause: retry.Cause{Kind: retry.KindTimeout, Code: "timeout"}, Message: "timed out"})
	acts := []runner.Action{runner.Record{Type: weft.HistoryStepCompleted, Path: "steps[0]", Step: "a"}}
	child := runner.StartChild{Token: "t2", StepID: "b", Workflow: "child"}
	runErr := errors.New("store down")

	for _, tc := range []struct {
		name   string
		tracer *tracing.Tracer
	}{
		{"tracer=nil", nil},
		{"instance without trace", on},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := &Engine{cfg: Config{NodeID: "n1", Tracer: tc.tracer, Observer: nopObserver{}}}
			inst := &weft.Instance{ID: "i1", Workflow: "three", Status: weft.StatusFailed, CreatedAt: now}
			x := &execution{e: e, ctx: ctx, inst: inst, traced: e.traced(inst), stepsDone: map[string]bool{}}
			if x.traced {
				t.Fatalf("instance %s: traced with %s, want not", inst.ID, tc.name)
			}
			tr := tc.tracer
			for _, path := range []struct {
				name string
				f    func()
			}{
				{"traced", func() { _ = e.traced(inst) }},
				{"startRun+endRun", func() {
					span := e.startRun(ctx, inst, now)
					if span.IsRecording() {
						t.Error("startRun: a recording span")
					}
					endRun(span, runErr)
				}},
				{"startAttempt+endAttempt", func() {
					var info abi.Info
					_, span := x.startAttempt(inv, "1.0.0", &info)
					endAttempt(span, completed, false)
					_, span = x.startAttempt(inv, "1.0.0", &info)
					endAttempt(span, failed, true)
					_, span = x.startAttempt(inv, "1.0.0", &info)
					endStopped(span, false)
					if info.TraceID != "" || info.SpanID != "" {
						t.Errorf("startAttempt: info has trace %q span %q", info.TraceID, info.SpanID)
					}
				}},
				{"steps", func() {
					before := x.stepsBefore()
					x.stepsEnded(before, acts, now)
					x.emitSteps(x.next.stepEnds)
				}},
				{"finished", func() { x.finished(inst, now) }},
				{"childContext", func() { _ = x.childContext(child) }},
				{"Tracer.Begin", func() { _ = tr.Begin(ctx) }},
				{"Tracer", func() {
					_ = tr.InStep(tr.InInstance(ctx, inst), inst, inv.IdempotencyKey)
					tr.EndStep(ctx, inst, inv.IdempotencyKey, now, now, runErr)
					tr.EndInstance(ctx, inst, now, runErr)
				}},
			} {
				if tr != nil && path.name == "Tracer.Begin" {
					continue // Begin of a Tracer that is on decides a trace: it allocates
				}
				if n := testing.AllocsPerRun(100, path.f); n != 0 {
					t.Errorf("%s with %s: %v allocations, want 0", path.name, tc.name, n)
				}
			}
			if len(x.next.stepEnds) != 0 {
				t.Errorf("steps: %d step ends queued for spans, want none", len(x.next.stepEnds))
			}
		})
	}
}
