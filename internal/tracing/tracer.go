// Package tracing makes the host's OpenTelemetry spans
// (docs/observability.md, "Traces"). An instance runs on many nodes over
// its life, one turn at a time, and a node may die in the middle of any;
// so the spans of an instance are not held open across turns. Instead
// each instance gets, when it is created, a span context of its own
// (weft.Trace, kept with the instance), and every span of the instance —
// a step, an attempt, a turn — hangs from it on whichever node makes it.
// The instance's span and each step's span are emitted when they end,
// with the ids decided before: the instance's from its Trace, a step's
// derived from the instance's trace and the step execution's key, so
// that the attempts of a step, made on several nodes, share one parent
// that no node had to keep.
//
// A nil *Tracer is off: every method returns at once, and the engine
// does no span work.
package tracing

import (
	"context"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/weftworks/weft/host/weft"
)

// Scope is the instrumentation scope of the host's spans.
const Scope = "github.com/weftworks/weft"

// Tracer makes the host's spans through an SDK TracerProvider whose span
// ids can be chosen (see the package doc).
type Tracer struct {
	provider *sdktrace.TracerProvider
	tracer   trace.Tracer
	root     sdktrace.Sampler
}

// NewTracer returns a Tracer whose provider samples a new trace with
// probability ratio (0 to 1; a trace that continues a caller's follows
// the caller's decision) and is built with opts besides (an exporter's
// batcher, a resource). Its sampler and ID generator are the Tracer's
// own: opts must not set them.
func NewTracer(ratio float64, opts ...sdktrace.TracerProviderOption) *Tracer {
	root := rootSampler{ratio: sdktrace.TraceIDRatioBased(ratio)}
	opts = append(opts, sdktrace.WithIDGenerator(idGenerator{}), sdktrace.WithSampler(sdktrace.ParentBased(root)))
	p := sdktrace.NewTracerProvider(opts...)
	return &Tracer{provider: p, tracer: p.Tracer(Scope), root: root.ratio}
}

// Provider is the Tracer's TracerProvider, for the parts that make spans
// of their own (the API's requests, the plugins' outbound requests); nil
// when t is nil.
func (t *Tracer) Provider() trace.TracerProvider {
	if t == nil {
		return nil
	}
	return t.provider
}

// Shutdown ends the Tracer: it exports the spans it still holds, until
// ctx ends.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Start starts a span under ctx's span, as trace.Tracer.Start does; a nil
// t returns ctx and a span that records nothing.
func (t *Tracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	if t == nil {
		return ctx, noop.Span{}
	}
	return t.tracer.Start(ctx, name, opts...)
}

// Begin decides the trace of an instance created under ctx, to be kept
// in weft.Instance.Trace; nil when t is nil. The instance's span is a
// child of ctx's span when ctx was marked with Join (a request that
// carried a traceparent, a parent instance's attempt), in its trace and
// with its sampling decision; otherwise it is the root of a new trace,
// sampled at the Tracer's ratio, linked to ctx's span when there is one.
func (t *Tracer) Begin(ctx context.Context) *weft.Trace {
	if t == nil {
		return nil
	}
	caller := trace.SpanContextFromContext(ctx)
	var tr weft.Trace
	var sc trace.SpanContext
	if caller.IsValid() && joined(ctx) {
		sc = trace.NewSpanContext(trace.SpanContextConfig{
			TraceID: caller.TraceID(), SpanID: newSpanID(), TraceFlags: caller.TraceFlags(), Remote: true,
		})
		tr.Parent = caller.SpanID().String()
	} else {
		id := newTraceID()
		res := t.root.ShouldSample(sdktrace.SamplingParameters{ParentContext: context.Background(), TraceID: id, Name: SpanInstance})
		var flags trace.TraceFlags
		if res.Decision == sdktrace.RecordAndSample {
			flags = trace.FlagsSampled
		}
		sc = trace.NewSpanContext(trace.SpanContextConfig{TraceID: id, SpanID: newSpanID(), TraceFlags: flags, Remote: true})
		if caller.IsValid() {
			tr.Link = traceparent(caller)
		}
	}
	tr.Span = traceparent(sc)
	return &tr
}

// Span names (docs/observability.md lists them with their attributes).
const (
	SpanInstance = "weft.instance"
	SpanStep     = "weft.step"
	SpanAttempt  = "weft.attempt"
	// SpanExecution is an execution: a node's work on an instance while
	// it holds its lock, from asking for the lock until the execution
	// ends, with its commits as events.
	SpanExecution = "weft.execution"
)

// Records reports whether inst's spans are recorded: t is not nil, inst
// was created with a trace, and that trace is sampled. Its caller starts
// no span for an instance that is not: an unsampled span would be built
// and dropped for nothing.
func (t *Tracer) Records(inst *weft.Instance) bool {
	if t == nil || inst.Trace == nil {
		return false
	}
	// The flags are the traceparent's last two hex digits; sampled is
	// the low bit.
	s := inst.Trace.Span
	if len(s) != 55 {
		return false
	}
	d, ok := hexDigit(s[54])
	return ok && d&1 == 1
}

// InInstance returns ctx carrying inst's span as the (remote) parent of
// the spans started under it: a turn of the instance on this node. It
// returns ctx when t is nil or inst has no trace.
func (t *Tracer) InInstance(ctx context.Context, inst *weft.Instance) context.Context {
	if t == nil || inst.Trace == nil {
		return ctx
	}
	sc, err := parseTraceparent(inst.Trace.Span)
	if err != nil {
		return ctx
	}
	return trace.ContextWithRemoteSpanContext(ctx, sc)
}

// InStep returns ctx carrying the span of inst's step execution key (the
// attempts' idempotency key, which names one execution of one step) as
// the parent of the spans started under it: its attempts. It returns ctx
// when t is nil or inst has no trace.
func (t *Tracer) InStep(ctx context.Context, inst *weft.Instance, key string) context.Context {
	if t == nil || inst.Trace == nil {
		return ctx
	}
	sc, err := parseTraceparent(inst.Trace.Span)
	if err != nil {
		return ctx
	}
	step := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: sc.TraceID(), SpanID: derivedSpanID(sc.TraceID(), key), TraceFlags: sc.TraceFlags(), Remote: true,
	})
	return trace.ContextWithRemoteSpanContext(ctx, step)
}

// EndStep records the span of inst's step execution key, from start to
// end, child of the instance's span, with the id its attempts were given
// as their parent (InStep); err, when not nil, marks it failed. It does
// nothing when t is nil or inst has no trace.
func (t *Tracer) EndStep(ctx context.Context, inst *weft.Instance, key string, start, end time.Time, err error, attrs ...trace.SpanStartOption) {
	if t == nil || inst.Trace == nil {
		return
	}
	sc, perr := parseTraceparent(inst.Trace.Span)
	if perr != nil || !sc.IsSampled() {
		return
	}
	ctx = withIDs(trace.ContextWithRemoteSpanContext(ctx, sc), forcedIDs{span: derivedSpanID(sc.TraceID(), key)})
	opts := append([]trace.SpanStartOption{trace.WithTimestamp(start)}, attrs...)
	_, span := t.tracer.Start(ctx, SpanStep, opts...)
	endSpan(span, end, err)
}

// EndInstance records inst's span, from its creation to end, with the
// ids and parent or link its Trace holds; err, when not nil, marks it
// failed. It does nothing when t is nil or inst has no trace.
func (t *Tracer) EndInstance(ctx context.Context, inst *weft.Instance, end time.Time, err error, attrs ...trace.SpanStartOption) {
	if t == nil || inst.Trace == nil {
		return
	}
	// An unsampled instance's span would be dropped by the sampler:
	// nothing is built for it.
	sc, perr := parseTraceparent(inst.Trace.Span)
	if perr != nil || !sc.IsSampled() {
		return
	}
	// ctx's values stay; its span does not: the instance's span hangs
	// from what its Trace says, not from whatever span ends it.
	parent := trace.ContextWithSpanContext(ctx, trace.SpanContext{})
	if inst.Trace.Parent != "" {
		if id, err := trace.SpanIDFromHex(inst.Trace.Parent); err == nil {
			parent = trace.ContextWithRemoteSpanContext(parent, trace.NewSpanContext(trace.SpanContextConfig{
				TraceID: sc.TraceID(), SpanID: id, TraceFlags: sc.TraceFlags(), Remote: true,
			}))
		}
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(inst.CreatedAt), trace.WithSpanKind(trace.SpanKindInternal)}
	if inst.Trace.Link != "" {
		if l, err := parseTraceparent(inst.Trace.Link); err == nil {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: l}))
		}
	}
	opts = append(opts, attrs...)
	ctx = withIDs(parent, forcedIDs{trace: sc.TraceID(), span: sc.SpanID(), sampled: sc.IsSampled()})
	_, span := t.tracer.Start(ctx, SpanInstance, opts...)
	endSpan(span, end, err)
}

// MaxText is the most bytes of a text a span keeps from a guest (a
// failure's message or code, which a plugin may make up to its output
// limit): a collector stores what it is sent.
const MaxText = 1024

// Bounded is s cut to at most MaxText bytes, on a rune's boundary, with
// "…" added when it was cut.
func Bounded(s string) string {
	if len(s) <= MaxText {
		return s
	}
	cut := MaxText - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// endSpan ends span at end, failed with err when it is not nil.
func endSpan(span trace.Span, end time.Time, err error) {
	if err != nil {
		span.SetStatus(codes.Error, Bounded(err.Error()))
	}
	span.End(trace.WithTimestamp(end))
}

// rootSampler samples a new trace at its ratio, except an instance's span
// whose decision was taken when the instance was created (Begin): that
// one is kept, so that the instance's span agrees with its children's.
type rootSampler struct {
	ratio sdktrace.Sampler
}

// ShouldSample implements sdktrace.Sampler.
func (s rootSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if f, ok := p.ParentContext.Value(forcedKey{}).(forcedIDs); ok && f.trace.IsValid() {
		d := sdktrace.Drop
		if f.sampled {
			d = sdktrace.RecordAndSample
		}
		return sdktrace.SamplingResult{Decision: d, Tracestate: trace.SpanContextFromContext(p.ParentContext).TraceState()}
	}
	return s.ratio.ShouldSample(p)
}

// Description implements sdktrace.Sampler.
func (s rootSampler) Description() string { return "WeftInstance{" + s.ratio.Description() + "}" }
