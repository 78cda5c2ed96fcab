package engine

import (
	"context"
	"errors"
	"strconv"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/tracing"
)

// The engine's spans (docs/observability.md, "Traces"): an execution of an
// instance on this node (tracing.SpanExecution) with its commits, lock, timers and
// messages as events; each attempt (tracing.SpanAttempt), child of its
// step's span; each step execution's span (tracing.Tracer.EndStep) and
// the instance's (EndInstance), emitted when they end. With a nil
// Config.Tracer, or an instance created without a trace, every span is
// a no-op and nothing is built for it.

// The attributes of the engine's spans.
const (
	attrInstance      = attribute.Key("weft.instance.id")
	attrWorkflow      = attribute.Key("weft.workflow")
	attrNode          = attribute.Key("weft.node")
	attrStep          = attribute.Key("weft.step.id")
	attrPlugin        = attribute.Key("weft.plugin")
	attrPluginVersion = attribute.Key("weft.plugin.version")
	attrActivity      = attribute.Key("weft.activity")
	attrAttempt       = attribute.Key("weft.attempt")
	attrAttempts      = attribute.Key("weft.attempts")
	attrOutcome       = attribute.Key("weft.outcome")
	attrFailureCode   = attribute.Key("weft.failure.code")
	attrStatus        = attribute.Key("weft.status")
	attrRefused       = attribute.Key("weft.refused")
	attrRev           = attribute.Key("weft.rev")
	attrDurationMS    = attribute.Key("duration_ms")
	attrEntries       = attribute.Key("entries")
	attrKind          = attribute.Key("weft.kind")
	attrLateMS        = attribute.Key("late_ms")
	attrPreviousNode  = attribute.Key("weft.previous_node")
)

// Outcomes of attempts and steps (attrOutcome).
const (
	outcomeCompleted = "completed"
	outcomeFailed    = "failed"
	outcomeCancelled = "cancelled"
	outcomeTimedOut  = "timed_out"
)

// traced reports whether inst's spans are recorded: tracing is on, the
// instance was created with a trace, and that trace is sampled. Only then
// does an execution follow its steps for their spans.
func (e *Engine) traced(inst *weft.Instance) bool {
	return e.cfg.Tracer.Records(inst)
}

// startRun starts the span of an execution of inst on this node, from start
// (when its lock was asked for); a no-op span when inst has no trace.
func (e *Engine) startRun(ctx context.Context, inst *weft.Instance, start time.Time) trace.Span {
	if !e.cfg.Tracer.Records(inst) {
		return trace.SpanFromContext(context.Background()) // no-op
	}
	_, span := e.cfg.Tracer.Start(e.cfg.Tracer.InInstance(ctx, inst), tracing.SpanExecution, trace.WithTimestamp(start), trace.WithSpanKind(trace.SpanKindInternal))
	if span.IsRecording() {
		span.SetAttributes(attrInstance.String(inst.ID), attrWorkflow.String(inst.Workflow), attrNode.String(e.cfg.NodeID))
	}
	return span
}

// endRun ends an execution's span, failed with err unless err says only that
// nothing ran or that the node is shutting down.
func endRun(span trace.Span, err error) {
	if err != nil && span.IsRecording() && !errors.Is(err, context.Canceled) {
		span.SetStatus(codes.Error, tracing.Bounded(err.Error()))
	}
	span.End()
}

// event adds a span event to the execution. Callers check
// x.span.IsRecording() first, so that nothing is built for a span that
// records nothing.
func (x *execution) event(name string, at time.Time, attrs ...attribute.KeyValue) {
	x.span.AddEvent(name, trace.WithTimestamp(at), trace.WithAttributes(attrs...))
}

// millis is d in milliseconds, fractions kept.
func millis(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// startAttempt starts the span of attempt inv of plugin version version,
// a child of its step execution's span, and returns the context the
// attempt runs under (its outbound requests' spans are the attempt's
// children). It fills info with the span's ids when it is sampled.
func (x *execution) startAttempt(inv runner.Invoke, version string, info *abi.Info) (context.Context, trace.Span) {
	t := x.e.cfg.Tracer
	if !t.Records(x.inst) {
		return x.ctx, trace.SpanFromContext(context.Background()) // no-op
	}
	ctx := t.InStep(t.InInstance(x.ctx, x.inst), x.inst, inv.IdempotencyKey)
	ctx, span := t.Start(ctx, tracing.SpanAttempt, trace.WithSpanKind(trace.SpanKindInternal))
	if !span.IsRecording() {
		return ctx, span
	}
	span.SetAttributes(
		attrInstance.String(x.inst.ID), attrStep.String(inv.StepID), attrPlugin.String(inv.Plugin),
		attrPluginVersion.String(version), attrActivity.String(inv.Activity), attrAttempt.Int(inv.Attempt),
	)
	if sc := span.SpanContext(); sc.IsValid() && sc.IsSampled() {
		info.TraceID, info.SpanID = sc.TraceID().String(), sc.SpanID().String()
	}
	return ctx, span
}

// endAttempt ends an attempt's span with the outcome in, the runner's
// input made of the attempt's end; refused says the instance did not wait
// for that end any more (its step was cancelled, timed out, reset).
func endAttempt(span trace.Span, in runner.Input, refused bool) {
	if !span.IsRecording() {
		span.End()
		return
	}
	switch in := in.(type) {
	case runner.ActivityCompleted:
		span.SetAttributes(attrOutcome.String(outcomeCompleted))
	case runner.ActivityFailed:
		span.SetAttributes(attrOutcome.String(attemptOutcome(in.Cause)), attrFailureCode.String(tracing.Bounded(in.Cause.Code)))
		span.SetStatus(codes.Error, tracing.Bounded(in.Message))
	}
	if refused {
		span.SetAttributes(attrRefused.Bool(true))
	}
	span.End()
}

// endStopped ends the span of an attempt stopped because its execution
// lost the instance or is shutting down: completed, when it completed
// anyway, otherwise cancelled.
func endStopped(span trace.Span, completed bool) {
	if !span.IsRecording() {
		span.End()
		return
	}
	if completed {
		span.SetAttributes(attrOutcome.String(outcomeCompleted), attrRefused.Bool(true))
	} else {
		span.SetAttributes(attrOutcome.String(outcomeCancelled))
	}
	span.End()
}

// attemptOutcome is the outcome of an attempt that failed for cause.
func attemptOutcome(cause retry.Cause) string {
	switch cause.Kind {
	case retry.KindCancelled:
		return outcomeCancelled
	case retry.KindTimeout, retry.KindHeartbeatTimeout:
		return outcomeTimedOut
	}
	return outcomeFailed
}

// stepRun is a step execution as the runner's state shows it, for its
// span once it ends.
type stepRun struct {
	path     string // the step's path, as history entries name it
	list     string
	index    int
	start    time.Time // when its first attempt was scheduled, or it started
	attempts int
}

// stepEnd is a step execution that ended, its span emitted once the
// commit that records its end succeeds.
type stepEnd struct {
	key, step, activity string
	attempts            int
	start, end          time.Time
	outcome, code       string
}

// runsOf adds the step executions under f (f's own and its children's)
// to runs, by their Exec.
func runsOf(f *runner.Frame, runs map[string]stepRun) {
	if f == nil || f.Run == nil {
		return
	}
	r := f.Run
	if r.Exec != "" {
		start := r.Scheduled
		if start.IsZero() {
			start = r.Started
		}
		runs[r.Exec] = stepRun{path: f.Path + "[" + strconv.Itoa(f.Index) + "]", list: f.List, index: f.Index, start: start, attempts: r.Attempt}
	}
	for _, c := range r.Children {
		runsOf(c, runs)
	}
}

// stepsBefore returns the step executions of the state before an Apply,
// when the instance's spans are recorded; nil otherwise.
func (x *execution) stepsBefore() map[string]stepRun {
	if !x.traced {
		return nil
	}
	runs := map[string]stepRun{}
	runsOf(x.st.Root, runs)
	return runs
}

// stepsEnded adds to the next commit the step executions of before that
// the Apply that returned acts ended: those it recorded as completed or
// failed, and those no longer in the state (cancelled with their
// instance, or abandoned by a reset).
func (x *execution) stepsEnded(before map[string]stepRun, acts []runner.Action, now time.Time) {
	if len(before) == 0 {
		return
	}
	after := map[string]stepRun{}
	runsOf(x.st.Root, after)
	ends := map[string]runner.Record{} // by path
	for _, a := range acts {
		if r, ok := a.(runner.Record); ok && (r.Type == weft.HistoryStepCompleted || r.Type == weft.HistoryStepFailed) {
			ends[r.Path] = r
		}
	}
	for exec, r := range before {
		rec, recorded := ends[r.path]
		if _, still := after[exec]; still && !recorded {
			continue
		}
		if x.stepsDone[exec] {
			continue // its end was recorded before (a failed step kept for a retry)
		}
		x.stepsDone[exec] = true
		s := x.stepAt(r.list, r.index)
		end := stepEnd{attempts: r.attempts, start: r.start, end: now, outcome: outcomeCancelled}
		if s != nil {
			end.step = s.ID
			if s.Activity != nil {
				end.activity = s.Activity.Plugin + "." + s.Activity.Name
			}
		}
		if recorded {
			end.step = rec.Step
			end.outcome = outcomeCompleted
			if rec.Type == weft.HistoryStepFailed {
				end.outcome = outcomeFailed
				end.code, _ = rec.Data["code"].(string)
			}
		}
		if end.step == "" {
			continue // a state the definition does not match: no key to name it
		}
		end.key = x.inst.ID + "/" + end.step + "/" + exec // as the runner's IdempotencyKey
		x.next.stepEnds = append(x.next.stepEnds, end)
	}
}

// stepAt is the step at index of list (a runner.Frame's List), nil when
// the definition has none there.
func (x *execution) stepAt(list string, index int) *definition.Step {
	if x.lists == nil {
		x.lists = map[string][]*definition.Step{}
		indexSteps(x.lists, "steps", x.prog.Definition().Steps)
	}
	steps := x.lists[list]
	if index < 0 || index >= len(steps) {
		return nil
	}
	return steps[index]
}

// indexSteps adds steps to lists under list and their nested lists under
// their own names, as the runner names them (runner.Frame.List).
func indexSteps(lists map[string][]*definition.Step, list string, steps []*definition.Step) {
	lists[list] = steps
	for i, s := range steps {
		if s == nil {
			continue
		}
		at := list + "[" + strconv.Itoa(i) + "]"
		switch {
		case s.If != nil:
			indexSteps(lists, at+".then", s.If.Then)
			indexSteps(lists, at+".else", s.If.Else)
		case s.Foreach != nil:
			indexSteps(lists, at+".do", s.Foreach.Do)
		case s.Parallel != nil:
			for b, br := range s.Parallel {
				indexSteps(lists, at+".parallel["+strconv.Itoa(b)+"]", br.Steps)
			}
		}
	}
}

// emitSteps emits the spans of the step executions whose end the commit
// just made recorded.
func (x *execution) emitSteps(ends []stepEnd) {
	for _, s := range ends {
		attrs := []attribute.KeyValue{attrStep.String(s.step), attrAttempts.Int(s.attempts), attrOutcome.String(s.outcome)}
		if s.activity != "" {
			attrs = append(attrs, attrActivity.String(s.activity))
		}
		var err error
		if s.outcome == outcomeFailed {
			attrs = append(attrs, attrFailureCode.String(tracing.Bounded(s.code)))
			err = errors.New("step " + s.step + " failed: " + s.code)
		}
		x.e.cfg.Tracer.EndStep(x.ctx, x.inst, s.key, s.start, s.end, err, trace.WithAttributes(attrs...))
	}
}

// finished tells the observer and the tracer that the commit just made
// finished the instance.
func (x *execution) finished(inst *weft.Instance, now time.Time) {
	x.e.cfg.Observer.InstanceFinished(inst.Workflow, inst.Status, now.Sub(inst.CreatedAt))
	if x.reopened || x.e.cfg.Tracer == nil || inst.Trace == nil {
		// A retried or reset instance's span was emitted when it first
		// finished: its later spans hang from it still.
		return
	}
	var err error
	if inst.Status == weft.StatusFailed {
		msg := "instance failed"
		if f := inst.Error; f != nil {
			msg = f.Code + ": " + f.Message
		}
		err = errors.New(msg)
	}
	x.e.cfg.Tracer.EndInstance(x.ctx, inst, now, err, trace.WithAttributes(
		attrWorkflow.String(inst.Workflow), attrInstance.String(inst.ID), attrStatus.String(string(inst.Status)),
	))
}

// childContext is the context a child instance of the execution's
// instance is created under: for its trace, a child of the span of the
// step execution that starts it (the step waiting on token, whose key is
// derived as the attempts' idempotency key is).
func (x *execution) childContext(c runner.StartChild) context.Context {
	t := x.e.cfg.Tracer
	if t == nil || x.inst.Trace == nil {
		return x.ctx
	}
	ctx := t.InInstance(x.ctx, x.inst)
	if r := runWaiting(x.st.Root, c.Token); r != nil {
		ctx = t.InStep(ctx, x.inst, x.inst.ID+"/"+c.StepID+"/"+r.Exec)
	}
	return tracing.Join(ctx)
}

// runWaiting is the step execution under f whose operation is token, nil
// when there is none.
func runWaiting(f *runner.Frame, token string) *runner.Run {
	if f == nil || f.Run == nil || token == "" {
		return nil
	}
	if f.Run.Token == token {
		return f.Run
	}
	for _, c := range f.Run.Children {
		if r := runWaiting(c, token); r != nil {
			return r
		}
	}
	return nil
}

// awaited reports whether the runner's state under f waits for the end of
// the attempt token: when it does not, the instance moved on without it
// and its end is refused.
func awaited(f *runner.Frame, token string) bool {
	r := runWaiting(f, token)
	return r != nil && r.Pending == runner.PendingActivity
}
