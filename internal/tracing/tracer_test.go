package tracing_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/tracing"
)

// newTracer returns a Tracer at ratio whose spans end in the returned
// exporter as soon as they end.
func newTracer(t *testing.T, ratio float64) (*tracing.Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr := tracing.NewTracer(ratio, sdktrace.WithSyncer(exp))
	t.Cleanup(func() {
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	return tr, exp
}

// byName returns the ended spans named name.
func byName(exp *tracetest.InMemoryExporter, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range exp.GetSpans() {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// TestAnInstanceIsOneTrace: the spans of an instance made by two Tracers
// (two nodes) hang from the ids its Trace holds: attempts from their
// step's span, the step's from the instance's, the instance's a root.
func TestAnInstanceIsOneTrace(t *testing.T) {
	node1, exp1 := newTracer(t, 1)
	node2, exp2 := newTracer(t, 1)
	created := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	inst := &weft.Instance{ID: "i-1", CreatedAt: created, Trace: node1.Begin(context.Background())}
	if inst.Trace == nil || inst.Trace.Parent != "" || inst.Trace.Link != "" {
		t.Fatalf("Begin without a caller = %+v, want a root", inst.Trace)
	}
	const key = "i-1/charge/e4"
	for i, node := range []*tracing.Tracer{node1, node2} {
		ctx := node.InStep(node.InInstance(context.Background(), inst), inst, key)
		_, span := node.Start(ctx, tracing.SpanAttempt)
		span.End()
		if i == 1 {
			node.EndStep(context.Background(), inst, key, created.Add(time.Second), created.Add(3*time.Second), errors.New("boom"))
			node.EndInstance(context.Background(), inst, created.Add(4*time.Second), nil)
		}
	}
	attempts := append(byName(exp1, tracing.SpanAttempt), byName(exp2, tracing.SpanAttempt)...)
	steps, roots := byName(exp2, tracing.SpanStep), byName(exp2, tracing.SpanInstance)
	if len(attempts) != 2 || len(steps) != 1 || len(roots) != 1 {
		t.Fatalf("%d attempts, %d steps, %d instances; want 2, 1, 1", len(attempts), len(steps), len(roots))
	}
	root, step := roots[0], steps[0]
	if root.Parent.IsValid() || root.SpanContext.TraceID().String() != inst.Trace.Span[3:35] || root.SpanContext.SpanID().String() != inst.Trace.Span[36:52] {
		t.Errorf("the instance's span %s (parent %s), want the root %s", root.SpanContext.SpanID(), root.Parent.SpanID(), inst.Trace.Span)
	}
	if !root.StartTime.Equal(created) || !root.EndTime.Equal(created.Add(4*time.Second)) {
		t.Errorf("the instance's span runs %s to %s, want its creation to its end", root.StartTime, root.EndTime)
	}
	if step.Parent.SpanID() != root.SpanContext.SpanID() || step.SpanContext.TraceID() != root.SpanContext.TraceID() {
		t.Errorf("the step's parent is %s, want the instance's %s", step.Parent.SpanID(), root.SpanContext.SpanID())
	}
	if step.Status.Code != codes.Error || step.Status.Description != "boom" {
		t.Errorf("the step's status = %+v, want the error", step.Status)
	}
	for _, a := range attempts {
		if a.Parent.SpanID() != step.SpanContext.SpanID() || a.SpanContext.TraceID() != root.SpanContext.TraceID() {
			t.Errorf("an attempt's parent is %s, want the step's %s", a.Parent.SpanID(), step.SpanContext.SpanID())
		}
	}
}

// TestBeginJoinsOrLinks: under a span marked with Join the instance is its
// child, in its trace and with its sampling; under another it is a new
// trace linked to it.
func TestBeginJoinsOrLinks(t *testing.T) {
	tr, exp := newTracer(t, 1)
	caller := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled, Remote: true,
	})
	ctx := trace.ContextWithRemoteSpanContext(context.Background(), caller)
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		child bool
	}{{"joined", tracing.Join(ctx), true}, {"not joined", ctx, false}} {
		t.Run(tc.name, func(t *testing.T) {
			exp.Reset()
			inst := &weft.Instance{ID: "i", CreatedAt: time.Now(), Trace: tr.Begin(tc.ctx)}
			tr.EndInstance(context.Background(), inst, time.Now(), nil)
			spans := exp.GetSpans()
			if len(spans) != 1 {
				t.Fatalf("%d spans, want 1", len(spans))
			}
			s := spans[0]
			if tc.child {
				if s.SpanContext.TraceID() != caller.TraceID() || s.Parent.SpanID() != caller.SpanID() || len(s.Links) != 0 {
					t.Errorf("trace %s parent %s links %d, want the caller's trace and span, no link", s.SpanContext.TraceID(), s.Parent.SpanID(), len(s.Links))
				}
				return
			}
			if s.SpanContext.TraceID() == caller.TraceID() || s.Parent.IsValid() {
				t.Errorf("trace %s parent %s, want a new trace's root", s.SpanContext.TraceID(), s.Parent.SpanID())
			}
			if len(s.Links) != 1 || s.Links[0].SpanContext.SpanID() != caller.SpanID() {
				t.Errorf("links %+v, want the caller's span", s.Links)
			}
		})
	}
}

// TestSamplingIsDecidedOnce: at ratio 0 an instance records nothing, its
// children included; an unsampled caller's decision is kept by a joined
// instance even at ratio 1.
func TestSamplingIsDecidedOnce(t *testing.T) {
	unsampled := trace.ContextWithRemoteSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{9}, SpanID: trace.SpanID{9}, Remote: true,
	}))
	for _, tc := range []struct {
		name  string
		ratio float64
		ctx   context.Context
	}{{"ratio 0", 0, context.Background()}, {"unsampled caller", 1, tracing.Join(unsampled)}} {
		t.Run(tc.name, func(t *testing.T) {
			tr, exp := newTracer(t, tc.ratio)
			inst := &weft.Instance{ID: "i", CreatedAt: time.Now(), Trace: tr.Begin(tc.ctx)}
			_, span := tr.Start(tr.InStep(context.Background(), inst, "k"), tracing.SpanAttempt)
			span.End()
			tr.EndStep(context.Background(), inst, "k", time.Now(), time.Now(), nil)
			tr.EndInstance(context.Background(), inst, time.Now(), nil)
			if n := len(exp.GetSpans()); n != 0 {
				t.Errorf("%d spans recorded, want none", n)
			}
		})
	}
}

// TestRecordsFollowsTheSampledFlag: an instance's spans are recorded
// when its trace is sampled, whatever the Tracer's ratio now.
func TestRecordsFollowsTheSampledFlag(t *testing.T) {
	tr, _ := newTracer(t, 0)
	var off *tracing.Tracer
	for _, tc := range []struct {
		name  string
		tr    *tracing.Tracer
		trace *weft.Trace
		want  bool
	}{
		{"sampled", tr, &weft.Trace{Span: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, true},
		{"sampled and random", tr, &weft.Trace{Span: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-03"}, true},
		{"not sampled", tr, &weft.Trace{Span: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00"}, false},
		{"no trace", tr, nil, false},
		{"malformed", tr, &weft.Trace{Span: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0x"}, false},
		{"tracing off", off, &weft.Trace{Span: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}, false},
	} {
		if got := tc.tr.Records(&weft.Instance{Trace: tc.trace}); got != tc.want {
			t.Errorf("%s: Records = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestANilTracerIsOff: every method of a nil Tracer returns at once.
func TestANilTracerIsOff(t *testing.T) {
	var tr *tracing.Tracer
	inst := &weft.Instance{ID: "i", Trace: tr.Begin(context.Background())}
	if inst.Trace != nil {
		t.Fatalf("Begin = %+v, want nil", inst.Trace)
	}
	ctx := tr.InStep(tr.InInstance(context.Background(), inst), inst, "k")
	if _, span := tr.Start(ctx, tracing.SpanAttempt); span.IsRecording() {
		t.Error("a nil Tracer's span records")
	}
	tr.EndStep(ctx, inst, "k", time.Now(), time.Now(), nil)
	tr.EndInstance(ctx, inst, time.Now(), nil)
	if tr.Provider() != nil || tr.Shutdown(ctx) != nil {
		t.Error("a nil Tracer has a provider or fails to shut down")
	}
}

// FuzzTraceparent: what parseTraceparent accepts is what the W3C
// propagator accepts of a version-00 traceparent, and it writes back the
// same.
func FuzzTraceparent(f *testing.F) {
	for _, s := range []string{
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"", "00--", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc, err := tracing.ParseTraceparent(s)
		want := trace.SpanContextFromContext(propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": s}))
		if len(s) != 55 || !strings.HasPrefix(s, "00-") {
			// Other versions and lengths are not what traceparent writes.
			if err == nil {
				t.Fatalf("%q accepted as %v", s, sc)
			}
			return
		}
		if (err == nil) != want.IsValid() {
			t.Fatalf("%q: parse err %v, the propagator's valid %v", s, err, want.IsValid())
		}
		if err != nil {
			return
		}
		if sc.TraceID() != want.TraceID() || sc.SpanID() != want.SpanID() || sc.TraceFlags() != want.TraceFlags() {
			t.Fatalf("%q: parsed %v, the propagator %v", s, sc, want)
		}
		if back, err := tracing.ParseTraceparent(tracing.Traceparent(sc)); err != nil || !back.Equal(sc) {
			t.Fatalf("%q: written back as %q, read again as %v (%v)", s, tracing.Traceparent(sc), back, err)
		}
	})
}

// TestBoundedCutsOnARune: a guest's text longer than MaxText is cut to
// at most MaxText bytes, on a rune's boundary, marked; a shorter one is
// kept whole.
func TestBoundedCutsOnARune(t *testing.T) {
	short := strings.Repeat("é", 10)
	if got := tracing.Bounded(short); got != short {
		t.Errorf("Bounded(%q) = %q, want it whole", short, got)
	}
	long := strings.Repeat("é", tracing.MaxText) // two bytes a rune
	got := tracing.Bounded(long)
	if len(got) > tracing.MaxText || !utf8.ValidString(got) || !strings.HasSuffix(got, "…") {
		t.Errorf("Bounded of %d bytes = %d bytes, valid UTF-8 %v, ends %q", len(long), len(got), utf8.ValidString(got), got[len(got)-3:])
	}
}
