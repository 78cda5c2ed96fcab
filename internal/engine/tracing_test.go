package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/tracing"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins/call"
)

// newTracer returns a Tracer that samples every trace into an in-memory
// exporter, shut down when the test ends.
func newTracer(t *testing.T) (*tracing.Tracer, *tracetest.InMemoryExporter) {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr := tracing.NewTracer(1, sdktrace.WithSyncer(exp))
	t.Cleanup(func() { _ = tr.Shutdown(context.Background()) })
	return tr, exp
}

// counted is an engine.Observer that counts the calls the tracing tests
// look at.
type counted struct {
	mu        sync.Mutex
	finished  []string // "workflow status"
	timers    int
	takenOver int
	abandoned map[string]int // by reason
}

func newCounted() *counted { return &counted{abandoned: map[string]int{}} }

func (o *counted) InstanceStatus(string, weft.Status)                 {}
func (o *counted) StepFinished(string, string, string, time.Duration) {}
func (o *counted) InstancesDeleted(string, int)                       {}
func (o *counted) ScheduleFired(string, bool, time.Duration)          {}
func (o *counted) SchedulesSkipped(string, int)                       {}
func (o *counted) SlotWaited(string, time.Duration)                   {}
func (o *counted) SlotCancelled(string, string)                       {}
func (o *counted) BatchApplied(string, string, int)                   {}

func (o *counted) InstanceFinished(workflow string, status weft.Status, d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if d <= 0 {
		status += " (no duration)"
	}
	o.finished = append(o.finished, workflow+" "+string(status))
}

func (o *counted) TimerFired(late time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.timers++
}

func (o *counted) InstanceTakenOver() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.takenOver++
}

func (o *counted) AttemptAbandoned(reason string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.abandoned[reason]++
}

// infos records the abi.Info of every call the engine makes.
type infos struct {
	engine.Plugins
	mu   sync.Mutex
	seen []call.Call
}

func (p *infos) Invoke(ctx context.Context, version string, c call.Call) ([]byte, error) {
	p.mu.Lock()
	p.seen = append(p.seen, c)
	p.mu.Unlock()
	return p.Plugins.Invoke(ctx, version, c)
}

func (p *infos) calls() []call.Call {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]call.Call(nil), p.seen...)
}

// attr is span s's attribute key, invalid when it has none.
func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// named returns the spans of spans named name, with attribute key = value
// when key is not empty.
func named(spans tracetest.SpanStubs, name, key, value string) tracetest.SpanStubs {
	var out tracetest.SpanStubs
	for _, s := range spans {
		if s.Name == name && (key == "" || attr(s, key).String() == value) {
			out = append(out, s)
		}
	}
	return out
}

// hasEvent reports whether s has an event named name.
func hasEvent(s tracetest.SpanStub, name string) bool {
	for _, e := range s.Events {
		if e.Name == name {
			return true
		}
	}
	return false
}

// waitSpans polls exp until ok holds of its spans, for up to 30 seconds.
func waitSpans(t *testing.T, exp *tracetest.InMemoryExporter, what string, ok func(tracetest.SpanStubs) bool) tracetest.SpanStubs {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans := exp.GetSpans()
		if ok(spans) {
			return spans
		}
		if time.Now().After(deadline) {
			t.Fatalf("spans: %s: not within 30s; have %s", what, spanNames(spans))
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

func spanNames(spans tracetest.SpanStubs) string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name+"("+attr(s, "weft.step.id").String()+")")
	}
	return strings.Join(names, " ")
}

// storedTrace reads instance id back from st and returns its trace's
// instance span context.
func storedTrace(t *testing.T, get func(context.Context, string) (*weft.Instance, error), id string) (*weft.Trace, trace.SpanContext) {
	t.Helper()
	inst, err := get(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if inst.Trace == nil {
		t.Fatalf("instance %s stored without a trace", id)
	}
	parts := strings.Split(inst.Trace.Span, "-")
	if len(parts) != 4 {
		t.Fatalf("instance %s: trace span %q is not a traceparent", id, inst.Trace.Span)
	}
	tid, err1 := trace.TraceIDFromHex(parts[1])
	sid, err2 := trace.SpanIDFromHex(parts[2])
	if err1 != nil || err2 != nil {
		t.Fatalf("instance %s: trace span %q: %v %v", id, inst.Trace.Span, err1, err2)
	}
	return inst.Trace, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid})
}

// An attempt that fails and is retried: one trace, the instance's span its
// root, the step's span its child, both attempts the step's children, the
// turns on the node children of the instance with their events; the
// stored instance keeps its trace (in both stores), and the guest gets the
// attempt's ids.
func TestTracingRetriedActivity(t *testing.T) {
	t.Parallel()
	for _, store := range []string{"bolt", "redis"} {
		t.Run(store, func(t *testing.T) {
			t.Parallel()
			tr, exp := newTracer(t)
			obs := newCounted()
			pl := &infos{}
			opts := []hostOption{
				withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, Tracer: tr, Observer: obs}),
				withPluginsWrapped(func(p engine.Plugins) engine.Plugins { pl.Plugins = p; return pl }),
			}
			if store == "redis" {
				opts = append(opts, withRedisStore())
			}
			h := newHost(t, opts...)
			h.save(`
name: flaky
steps:
  - id: try
    activity: kit.fail
    input: { code: busy, retryable: true, fail_attempts: 1 }
    retry: { max_attempts: 3, initial_interval: 10ms }
    output: result
output: "${ vars.result.attempt }"
`)
			inst := h.finish("flaky", nil)
			if inst.Status != weft.StatusCompleted || string(inst.Output) != "2" {
				t.Fatalf("instance %s output %s error %+v", inst.Status, inst.Output, inst.Error)
			}
			stored, sc := storedTrace(t, h.store.GetInstance, inst.ID)
			if stored.Parent != "" || stored.Link != "" {
				t.Errorf("stored trace %+v: want a root without a link (started without a span)", stored)
			}

			spans := waitSpans(t, exp, "instance, step, 2 attempts, a turn that fired the timer", func(s tracetest.SpanStubs) bool {
				runs := named(s, tracing.SpanExecution, "", "")
				timed := false
				for _, r := range runs {
					timed = timed || hasEvent(r, "timer")
				}
				return len(named(s, tracing.SpanInstance, "", "")) == 1 && len(named(s, tracing.SpanStep, "", "")) == 1 &&
					len(named(s, tracing.SpanAttempt, "", "")) == 2 && len(runs) >= 2 && timed
			})
			for _, s := range spans {
				if s.SpanContext.TraceID() != sc.TraceID() {
					t.Errorf("span %s in trace %s, want the instance's %s", s.Name, s.SpanContext.TraceID(), sc.TraceID())
				}
			}
			root := named(spans, tracing.SpanInstance, "", "")[0]
			if root.SpanContext.SpanID() != sc.SpanID() || root.Parent.IsValid() {
				t.Errorf("instance span %s parent %v, want %s as a root", root.SpanContext.SpanID(), root.Parent, sc.SpanID())
			}
			if got := attr(root, "weft.status").String(); got != "completed" || attr(root, "weft.instance.id").String() != inst.ID {
				t.Errorf("instance span status %q attrs %v", got, root.Attributes)
			}
			step := named(spans, tracing.SpanStep, "", "")[0]
			if step.Parent.SpanID() != sc.SpanID() || attr(step, "weft.step.id").String() != "try" ||
				attr(step, "weft.attempts").AsInt64() != 2 || attr(step, "weft.outcome").String() != "completed" || attr(step, "weft.activity").String() != "kit.fail" {
				t.Errorf("step span parent %s attrs %v", step.Parent.SpanID(), step.Attributes)
			}
			byAttempt := map[int64]tracetest.SpanStub{}
			for _, a := range named(spans, tracing.SpanAttempt, "", "") {
				if a.Parent.SpanID() != step.SpanContext.SpanID() {
					t.Errorf("attempt %d's parent %s, want the step's %s", attr(a, "weft.attempt").AsInt64(), a.Parent.SpanID(), step.SpanContext.SpanID())
				}
				if attr(a, "weft.plugin").String() != "kit" || attr(a, "weft.activity").String() != "fail" || attr(a, "weft.plugin.version").String() == "" || attr(a, "weft.step.id").String() != "try" {
					t.Errorf("attempt attrs %v", a.Attributes)
				}
				byAttempt[attr(a, "weft.attempt").AsInt64()] = a
			}
			if a := byAttempt[1]; attr(a, "weft.outcome").String() != "failed" || attr(a, "weft.failure.code").String() != "busy" || a.Status.Code != codes.Error {
				t.Errorf("attempt 1: attrs %v status %v, want failed with busy", a.Attributes, a.Status)
			}
			if a := byAttempt[2]; attr(a, "weft.outcome").String() != "completed" || a.Status.Code == codes.Error {
				t.Errorf("attempt 2: attrs %v status %v, want completed", a.Attributes, a.Status)
			}
			// Every turn took the lock; a turn may commit nothing (woken
			// again once the instance finished).
			commits := 0
			for _, r := range named(spans, tracing.SpanExecution, "", "") {
				if r.Parent.SpanID() != sc.SpanID() || attr(r, "weft.node").String() != "n1" || attr(r, "weft.instance.id").String() != inst.ID || attr(r, "weft.workflow").String() != "flaky" {
					t.Errorf("run span parent %s attrs %v", r.Parent.SpanID(), r.Attributes)
				}
				if !hasEvent(r, "lock") {
					t.Errorf("run span events %v: want lock", r.Events)
				}
				if hasEvent(r, "commit") {
					commits++
				}
			}
			if commits < 2 {
				t.Errorf("%d turns committed, want the first attempt's and the second's", commits)
			}
			// The guest's Info carries its attempt's span.
			calls := pl.calls()
			if len(calls) != 2 {
				t.Fatalf("%d calls, want 2", len(calls))
			}
			for _, c := range calls {
				a := byAttempt[int64(c.Info.Attempt)]
				if c.Info.TraceID != sc.TraceID().String() || c.Info.SpanID != a.SpanContext.SpanID().String() {
					t.Errorf("attempt %d's Info has trace %q span %q, want %s %s", c.Info.Attempt, c.Info.TraceID, c.Info.SpanID, sc.TraceID(), a.SpanContext.SpanID())
				}
			}
			obs.mu.Lock()
			defer obs.mu.Unlock()
			if len(obs.finished) != 1 || obs.finished[0] != "flaky completed" || obs.timers < 1 {
				t.Errorf("observer: finished %v, %d timers fired; want flaky completed once, the retry's timer", obs.finished, obs.timers)
			}
		})
	}
}

// A child workflow's trace is its parent's: its instance span is a child
// of the parent's step that started it.
func TestTracingChildJoinsParentStep(t *testing.T) {
	t.Parallel()
	tr, exp := newTracer(t)
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, Tracer: tr}))
	h.save(`
name: kid
steps: [ { id: e, activity: kit.echo, input: 2, output: e } ]
output: "${ vars.e }"
`)
	h.save(`
name: mom
steps: [ { id: sub, workflow: kid, output: k } ]
output: "${ vars.k }"
`)
	inst := h.finish("mom", nil)
	if inst.Status != weft.StatusCompleted || string(inst.Output) != "2" {
		t.Fatalf("instance %s output %s error %+v", inst.Status, inst.Output, inst.Error)
	}
	_, parent := storedTrace(t, h.store.GetInstance, inst.ID)
	spans := waitSpans(t, exp, "both instances' spans and their steps", func(s tracetest.SpanStubs) bool {
		return len(named(s, tracing.SpanInstance, "", "")) == 2 && len(named(s, tracing.SpanStep, "weft.step.id", "sub")) == 1 && len(named(s, tracing.SpanStep, "weft.step.id", "e")) == 1
	})
	sub := named(spans, tracing.SpanStep, "weft.step.id", "sub")[0]
	kids := named(spans, tracing.SpanInstance, "weft.workflow", "kid")
	if len(kids) != 1 {
		t.Fatalf("kid's instance spans: %d", len(kids))
	}
	kid := kids[0]
	if kid.SpanContext.TraceID() != parent.TraceID() || kid.Parent.SpanID() != sub.SpanContext.SpanID() {
		t.Errorf("kid's span in trace %s under %s, want %s under the step sub's %s", kid.SpanContext.TraceID(), kid.Parent.SpanID(), parent.TraceID(), sub.SpanContext.SpanID())
	}
	kidTrace, _ := storedTrace(t, h.store.GetInstance, attr(kid, "weft.instance.id").String())
	if kidTrace.Parent != sub.SpanContext.SpanID().String() {
		t.Errorf("kid's stored trace %+v, want parent %s", kidTrace, sub.SpanContext.SpanID())
	}
}

// Without a Tracer nothing is traced: the instance has no trace and the
// guest gets no ids.
func TestTracingOff(t *testing.T) {
	t.Parallel()
	pl := &infos{}
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { pl.Plugins = p; return pl }))
	h.save(`
name: quick
steps: [ { id: e, activity: kit.echo, input: 1, output: e } ]
`)
	inst := h.finish("quick", nil)
	got, err := h.store.GetInstance(context.Background(), inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Trace != nil {
		t.Errorf("instance stored with trace %+v without a Tracer", got.Trace)
	}
	for _, c := range pl.calls() {
		if c.Info.TraceID != "" || c.Info.SpanID != "" {
			t.Errorf("Info with trace %q span %q without a Tracer", c.Info.TraceID, c.Info.SpanID)
		}
	}
}

// tracedNode is a cluster node (see cluster.nodeWith) with a tracer and
// an observer of its own.
func (c *cluster) tracedNode(name string, tr *tracing.Tracer, obs engine.Observer) (*engine.Engine, func() func()) {
	c.t.Helper()
	e, err := engine.New(engine.Config{
		NodeID: name, LockTTL: lockTTL, RecoveryInterval: 50 * time.Millisecond, TimerInterval: 10 * time.Millisecond,
		Heartbeat: heartbeat.Config{Tick: 10 * time.Millisecond, Cycle: 200 * time.Millisecond},
		Tracer:    tr, Observer: obs,
	}, c.store, local.New(local.Config{}), memqueue.New(100), c.rt)
	if err != nil {
		c.t.Fatal(err)
	}
	return e, func() func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = e.Run(ctx); close(done) }()
		stop := func() { cancel(); <-done }
		c.t.Cleanup(stop)
		return stop
	}
}

// A node stops in the middle of an attempt and another takes the
// instance over: the second node's spans continue the instance's trace,
// its attempt under the same step span as the first node's, and its
// observer sees the takeover and the abandoned attempt.
func TestTracingSurvivesTakeover(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	trA, expA := newTracer(t)
	trB, expB := newTracer(t)
	obsB := newCounted()
	a, runA := c.tracedNode("node-a", trA, nil)
	if _, _, err := a.SaveDefinition(ctx, []byte(`
name: long
persistence: activity
steps:
  - { id: first, activity: kit.echo, input: 1 }
  - { id: work, activity: kit.work, input: { ms: 800, beat_ms: 50 }, output: work }
output: "${ vars.work.done_ms }"
`)); err != nil {
		t.Fatal(err)
	}
	stopA := runA()
	inst, _, err := a.Start(ctx, "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	c.waitStored(inst.ID, "run by node A", func(in *weft.Instance) bool {
		return in.Status == weft.StatusRunning && in.Lease.Node == "node-a"
	})
	stopA()
	b, runB := c.tracedNode("node-b", trB, obsB)
	runB()
	if done := c.waitFinished(b, inst.ID); done.Status != weft.StatusCompleted {
		t.Fatalf("instance %s error %+v", done.Status, done.Error)
	}
	_, sc := storedTrace(t, c.store.GetInstance, inst.ID)
	spansB := waitSpans(t, expB, "B's instance span, its work step and attempt, its turn", func(s tracetest.SpanStubs) bool {
		return len(named(s, tracing.SpanInstance, "", "")) == 1 && len(named(s, tracing.SpanStep, "weft.step.id", "work")) == 1 &&
			len(named(s, tracing.SpanAttempt, "weft.step.id", "work")) == 1 && len(named(s, tracing.SpanExecution, "", "")) >= 1
	})
	spansA := expA.GetSpans() // A stopped: all its spans ended
	for _, s := range append(append(tracetest.SpanStubs{}, spansA...), spansB...) {
		if s.SpanContext.TraceID() != sc.TraceID() {
			t.Errorf("span %s in trace %s, want the instance's %s", s.Name, s.SpanContext.TraceID(), sc.TraceID())
		}
	}
	workA := named(spansA, tracing.SpanAttempt, "weft.step.id", "work")
	workB := named(spansB, tracing.SpanAttempt, "weft.step.id", "work")
	step := named(spansB, tracing.SpanStep, "weft.step.id", "work")[0]
	if len(workA) != 1 || attr(workA[0], "weft.attempt").AsInt64() != 1 || attr(workA[0], "weft.outcome").String() != "cancelled" {
		t.Fatalf("A's work attempts %v", workA)
	}
	if attr(workB[0], "weft.attempt").AsInt64() != 2 || attr(workB[0], "weft.outcome").String() != "completed" {
		t.Errorf("B's work attempt attrs %v", workB[0].Attributes)
	}
	if workA[0].Parent.SpanID() != step.SpanContext.SpanID() || workB[0].Parent.SpanID() != step.SpanContext.SpanID() || step.Parent.SpanID() != sc.SpanID() {
		t.Errorf("work attempts under %s and %s, step %s under %s; want both under the step, under the instance %s",
			workA[0].Parent.SpanID(), workB[0].Parent.SpanID(), step.SpanContext.SpanID(), step.Parent.SpanID(), sc.SpanID())
	}
	if len(named(spansA, tracing.SpanStep, "weft.step.id", "first")) != 1 {
		t.Errorf("A's spans %s: want the step first's", spanNames(spansA))
	}
	tookOver := false
	for _, r := range named(spansB, tracing.SpanExecution, "", "") {
		tookOver = tookOver || hasEvent(r, "takeover")
	}
	if !tookOver {
		t.Errorf("no turn of B has a takeover event")
	}
	obsB.mu.Lock()
	defer obsB.mu.Unlock()
	if obsB.takenOver != 1 || obsB.abandoned[engine.AbandonedNodeLost] != 1 || len(obsB.finished) != 1 {
		t.Errorf("B's observer: %d takeovers, abandoned %v, finished %v; want 1, 1 node_lost, 1", obsB.takenOver, obsB.abandoned, obsB.finished)
	}
}
