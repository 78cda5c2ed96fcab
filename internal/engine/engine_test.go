package engine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
)

// host is an engine on real parts: the kit plugin in a plugin runtime, a
// bbolt file, the in-process locker and queue.
type host struct {
	t     testing.TB
	e     *engine.Engine
	store store.Store
}

// hostOption changes what newHost builds.
type hostOption func(*hostParts)

// hostParts is what the options change.
type hostParts struct {
	cfg   engine.Config
	locks lock.Locker
	// wrap, when set, is the store the engine uses around the real one:
	// a fault to inject.
	wrap func(store.Store) store.Store
	// wrapQueue, when set, is the queue the engine uses around the
	// in-process one.
	wrapQueue func(queue.Queue) queue.Queue
	// plugins configures the plugin runtime, and wrapPlugins, when set,
	// is what the engine calls around it: a counter, or a fault to inject.
	plugins     plugins.Config
	wrapPlugins func(engine.Plugins) engine.Plugins
	// redis stores in a real redis-server instead of a bbolt file.
	redis bool
}

// withPlugins runs the plugins with cfg.
func withPlugins(cfg plugins.Config) hostOption {
	return func(p *hostParts) { p.plugins = cfg }
}

// withStore has the engine use wrap(the real store).
func withStore(wrap func(store.Store) store.Store) hostOption {
	return func(p *hostParts) { p.wrap = wrap }
}

// withPluginsWrapped has the engine call wrap(the real runtime).
func withPluginsWrapped(wrap func(engine.Plugins) engine.Plugins) hostOption {
	return func(p *hostParts) { p.wrapPlugins = wrap }
}

// withRedisStore has the engine store in a real redis-server (redisstore)
// rather than in a bbolt file.
func withRedisStore() hostOption {
	return func(p *hostParts) { p.redis = true }
}

// withConfig runs the engine with cfg instead of the default test
// configuration (node n1, a 10ms timer sweep).
func withConfig(cfg engine.Config) hostOption {
	return func(p *hostParts) { p.cfg = cfg }
}

// withLocks gives the engine locks instead of an in-process locker.
func withLocks(locks lock.Locker) hostOption {
	return func(p *hostParts) { p.locks = locks }
}

func newHost(t testing.TB, opts ...hostOption) *host {
	t.Helper()
	parts := hostParts{cfg: engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond}, locks: local.New(local.Config{})}
	for _, o := range opts {
		o(&parts)
	}
	cfg, locks := parts.cfg, parts.locks
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	var st store.Store
	if parts.redis {
		st = openRedisStore(t)
	} else {
		st = openStore(t)
	}
	rt := testplugins.Runtime(t, parts.plugins)
	ctx := context.Background()
	m, err := rt.Load(ctx, testplugins.Bytes(t, "kit"))
	if err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, a := range m.Activities {
		acts = append(acts, a.Name)
	}
	if _, err := st.PutPlugin(ctx, weft.PluginRecord{Name: "kit", Version: m.Version, Size: int64(m.Size), Activities: acts}); err != nil {
		t.Fatal(err)
	}
	var engineStore store.Store = st
	if parts.wrap != nil {
		engineStore = parts.wrap(st)
	}
	var pl engine.Plugins = rt
	if parts.wrapPlugins != nil {
		pl = parts.wrapPlugins(rt)
	}
	var q queue.Queue = memqueue.New(1000)
	if parts.wrapQueue != nil {
		q = parts.wrapQueue(q)
	}
	e, err := engine.New(cfg, engineStore, locks, q, pl)
	if err != nil {
		t.Fatal(err)
	}
	runEngine(t, e)
	return &host{t: t, e: e, store: st}
}

// openStore opens a bbolt store in a file of the test's temporary
// directory, closed when the test ends.
func openStore(t testing.TB) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "store"), embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// openRedisStore opens a Redis store on a redis-server of its own, closed
// when the test ends.
func openRedisStore(t testing.TB) *redisstore.Store {
	t.Helper()
	srv := redistest.Start(t)
	st, err := redisstore.Open(context.Background(), redisstore.Config{Client: srv.Client(t), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

// runEngine runs e until the test ends.
func runEngine(t testing.TB, e *engine.Engine) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
}

func (h *host) save(source string) {
	h.t.Helper()
	if _, _, err := h.e.SaveDefinition(context.Background(), []byte(source)); err != nil {
		h.t.Fatalf("saving definition: %v", err)
	}
}

// finish starts an instance and waits until it is finished.
func (h *host) finish(workflow string, input any) *weft.Instance {
	h.t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		h.t.Fatalf("encoding the input: %v", err)
	}
	inst, _, err := h.e.Start(context.Background(), workflow, in, "")
	if err != nil {
		h.t.Fatalf("Start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := h.e.WaitFinished(ctx, inst.ID)
	if err != nil {
		h.t.Fatalf("Wait: %v", err)
	}
	if !got.Status.Terminal() {
		h.t.Fatalf("instance %s is %s, want finished", inst.ID, got.Status)
	}
	return got
}

func (h *host) history(id string) []weft.HistoryEntry {
	h.t.Helper()
	evs, err := h.store.History(context.Background(), id, 0, 1000)
	if err != nil {
		h.t.Fatal(err)
	}
	return evs
}

func count(evs []weft.HistoryEntry, typ weft.HistoryType) int {
	n := 0
	for _, e := range evs {
		if e.Type == typ {
			n++
		}
	}
	return n
}

func TestSequenceCompletes(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: shout
steps:
  - { id: prep, set: { greeting: "hello ${ input.name }" } }
  - { id: up, activity: kit.upper, input: { text: "${ vars.greeting }" }, output: up }
  - { id: back, activity: kit.echo, input: "${ vars.up }", output: echoed }
output: "${ vars.echoed.text }"
`)
	inst := h.finish("shout", map[string]any{"name": "ada"})
	if inst.Status != weft.StatusCompleted || string(inst.Output) != `"HELLO ADA"` {
		t.Fatalf("instance %s output %s error %+v", inst.Status, inst.Output, inst.Error)
	}
	evs := h.history(inst.ID)
	if count(evs, "activity_completed") != 2 || count(evs, "instance_completed") != 1 || evs[0].Type != "instance_created" {
		t.Errorf("history: %v", types(evs))
	}
	for _, e := range evs[1:] {
		if e.Node != "n1" {
			t.Errorf("event %s from node %q, want n1", e.Type, e.Node)
		}
	}
}

func types(evs []weft.HistoryEntry) []string {
	var s []string
	for _, e := range evs {
		s = append(s, string(e.Type))
	}
	return s
}

func TestRetriesOnDurableTimersUntilSuccess(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: flaky
steps:
  - id: try
    activity: kit.fail
    input: { code: busy, retryable: true, fail_attempts: 2 }
    retry: { max_attempts: 5, initial_interval: 20ms, backoff: 2 }
    output: result
output: "${ vars.result.attempt }"
`)
	inst := h.finish("flaky", nil)
	if inst.Status != weft.StatusCompleted || string(inst.Output) != "3" {
		t.Fatalf("instance %s output %s error %+v", inst.Status, inst.Output, inst.Error)
	}
	evs := h.history(inst.ID)
	if count(evs, "activity_failed") != 2 || count(evs, "retry_scheduled") != 2 || count(evs, "activity_scheduled") != 3 {
		t.Errorf("history: %v", types(evs))
	}
	if timers, _ := h.store.Timers(context.Background(), inst.ID); len(timers) != 0 {
		t.Errorf("%d timers left after completion", len(timers))
	}
}

func TestFailures(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: declined
steps:
  - { id: charge, activity: kit.fail, input: { code: card_declined, message: "no funds" }, retry: { max_attempts: 3 } }
`)
	h.save(`
name: stuck
steps:
  - { id: forever, activity: kit.spin, timeout: 200ms, retry: { max_attempts: 2, initial_interval: 10ms } }
`)
	tests := []struct {
		workflow, code, message string
	}{
		{"declined", "card_declined", "no funds"},
		{"stuck", "timeout", "deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.workflow, func(t *testing.T) {
			t.Parallel()
			inst := h.finish(tt.workflow, nil)
			if inst.Status != weft.StatusFailed || inst.Error == nil || inst.Error.Code != tt.code || !strings.Contains(inst.Error.Message, tt.message) {
				t.Fatalf("instance %s error %+v, want code %s", inst.Status, inst.Error, tt.code)
			}
		})
	}
}

func TestForeachAndParallel(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: fan
steps:
  - id: each
    foreach: "${ input.words }"
    as: w
    concurrency: 3
    do:
      - { id: up, activity: kit.upper, input: { text: "${ w }" }, output: last }
  - id: both
    parallel:
      - steps: [ { id: a, activity: kit.echo, input: 1, output: a } ]
      - steps: [ { id: b, activity: kit.echo, input: 2, output: b } ]
  - { id: pause, delay: 30ms }
output: "${ [vars.a, vars.b] }"
`)
	inst := h.finish("fan", map[string]any{"words": []any{"x", "y", "z", "w", "v"}})
	if inst.Status != weft.StatusCompleted || string(inst.Output) != "[1,2]" {
		t.Fatalf("instance %s output %s error %+v", inst.Status, inst.Output, inst.Error)
	}
	if n := count(h.history(inst.ID), "activity_completed"); n != 7 {
		t.Errorf("%d activities completed, want 7", n)
	}
}

// The persistence strategy decides how often a run writes the instance:
// lazy only when it suspends or finishes, activity after every activity.
func TestPersistenceStrategies(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	for _, p := range []string{"lazy", "activity"} {
		h.save(`
name: p-` + p + `
persistence: ` + p + `
steps:
  - { id: one, activity: kit.echo }
  - { id: two, activity: kit.echo }
  - { id: three, activity: kit.echo }
`)
	}
	revs := map[string]uint64{}
	for _, p := range []string{"lazy", "activity"} {
		inst := h.finish("p-"+p, nil)
		if inst.Status != weft.StatusCompleted {
			t.Fatalf("%s: %s %+v", p, inst.Status, inst.Error)
		}
		revs[p] = inst.Rev
	}
	// Create is revision 1. Lazy: one more commit at completion; activity:
	// after each of the three activities (the last together with completion).
	if revs["lazy"] != 2 || revs["activity"] != 4 {
		t.Errorf("revisions: lazy %d, activity %d; want 2 and 4", revs["lazy"], revs["activity"])
	}
}

// echoWorkflow is one kit.echo step whose output is the workflow's.
const echoWorkflow = `
name: echo
steps:
  - { id: a, activity: kit.echo, input: "${ input }", output: a }
output: "${ vars.a }"
`

// TestStartTakesTheInputAsJSON: the input is stored as the caller gave it
// (the store compacts it), null when there is none; and one that is JSON
// but holds a number no Go value holds passes whole, as its bytes (it
// once left the instance pending for ever, then failed it).
func TestStartTakesTheInputAsJSON(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(echoWorkflow)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tt := range []struct {
		input, stored string
		status        weft.Status
		output, code  string
	}{
		{input: `{ "n": [1, 2.5] }`, stored: `{"n":[1,2.5]}`, status: weft.StatusCompleted, output: `{"n":[1,2.5]}`},
		{input: ``, stored: `null`, status: weft.StatusCompleted, output: `null`},
		// Kept as its bytes: a number beyond float64 passes whole.
		{input: `{"n": 1e400}`, stored: `{"n":1e400}`, status: weft.StatusCompleted, output: `{"n":1e400}`},
	} {
		inst, _, err := h.e.Start(ctx, "echo", json.RawMessage(tt.input), "")
		if err != nil {
			t.Fatalf("Start(%s): %v", tt.input, err)
		}
		if string(inst.Input) != tt.stored {
			t.Errorf("Start(%s) stored %s, want %s", tt.input, inst.Input, tt.stored)
		}
		got, err := h.e.WaitFinished(ctx, inst.ID)
		if err != nil {
			t.Fatalf("instance %s of input %s: %v", inst.ID, tt.input, err)
		}
		var code string
		if got.Error != nil {
			code = got.Error.Code
		}
		if got.Status != tt.status || string(got.Output) != tt.output || code != tt.code {
			t.Errorf("input %s: instance %s output %s error %+v; want %s, output %s, code %q", tt.input, got.Status, got.Output, got.Error, tt.status, tt.output, tt.code)
		}
	}
}

// TestStartAndWaitAnswerTheInstanceAsStored: Start and a Wait woken by
// this node's commit answer without reading the instance back, so what
// they answer must be what the store holds, times and revision included.
func TestStartAndWaitAnswerTheInstanceAsStored(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(echoWorkflow)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	same := func(what string, got *weft.Instance) {
		t.Helper()
		want, err := h.store.GetInstance(ctx, got.ID)
		if err != nil {
			t.Fatal(err)
		}
		g, _ := json.Marshal(got)
		w, _ := json.Marshal(want)
		if !bytes.Equal(g, w) || !bytes.Equal(got.State, want.State) {
			t.Errorf("%s answered\n%s\nthe store holds\n%s", what, g, w)
		}
	}
	inst, _, err := h.e.Start(ctx, "echo", json.RawMessage(`{ "n": [1, 2.5] }`), "")
	if err != nil {
		t.Fatal(err)
	}
	same("Start", inst)
	got, err := h.e.WaitFinished(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != weft.StatusCompleted {
		t.Fatalf("instance %s, want completed", got.Status)
	}
	same("WaitFinished", got)
}

// TestStartWatched: a Watch registered by StartWatched sees the instance
// finish without a first read; one on an instance that has finished
// answers at once; one never waited on can be stopped.
func TestStartWatched(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(echoWorkflow)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, id := range []string{"", "watched", "watched"} {
		inst, _, w, err := h.e.StartWatched(ctx, "echo", json.RawMessage(`{"n":1}`), weft.StartOptions{ID: id})
		if err != nil {
			t.Fatal(err)
		}
		got, err := w.WaitFinished(ctx)
		w.Stop()
		if err != nil {
			t.Fatalf("instance %s: %v", inst.ID, err)
		}
		if got.Status != weft.StatusCompleted || string(got.Output) != `{"n":1}` {
			t.Errorf("instance %s: %s, output %s", inst.ID, got.Status, got.Output)
		}
	}
	// Stopped without a wait, and started again while it runs: the
	// first Watch must not be woken for the second's commit.
	_, _, w, err := h.e.StartWatched(ctx, "echo", json.RawMessage(`2`), weft.StartOptions{ID: "stopped"})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	_, _, w2, err := h.e.StartWatched(ctx, "echo", json.RawMessage(`2`), weft.StartOptions{ID: "stopped"})
	if err != nil {
		t.Fatal(err)
	}
	defer w2.Stop()
	if got, err := w2.Wait(ctx); err != nil || got.Status != weft.StatusCompleted {
		t.Fatalf("second watch of the same instance: %+v, %v", got, err)
	}
}

func TestStartIsIdempotentByID(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: once
steps: [ { id: e, activity: kit.echo, input: 1 } ]
`)
	ctx := context.Background()
	a, _, err := h.e.Start(ctx, "once", nil, "client-id-1")
	if err != nil {
		t.Fatal(err)
	}
	b, created, err := h.e.Start(ctx, "once", nil, "client-id-1")
	if err != nil || created || b.ID != a.ID || b.CreatedAt != a.CreatedAt {
		t.Fatalf("second Start: %+v, created %t, %v; want the first instance, not created", b, created, err)
	}

	// Concurrent starts with one id: exactly one creates it.
	const n = 8
	var wg sync.WaitGroup
	results := make(chan bool, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inst, created, err := h.e.Start(ctx, "once", nil, "client-id-2")
			if err != nil || inst.ID != "client-id-2" {
				t.Errorf("concurrent Start: %+v, %v", inst, err)
			}
			results <- created
		}()
	}
	wg.Wait()
	close(results)
	creators := 0
	for c := range results {
		if c {
			creators++
		}
	}
	if creators != 1 {
		t.Errorf("%d of %d concurrent Starts with one id created it, want 1", creators, n)
	}

	// The id of an instance of another workflow is refused.
	h.save(`
name: other
steps: [ { id: e, activity: kit.echo, input: 1 } ]
`)
	if _, _, err := h.e.Start(ctx, "other", nil, "client-id-1"); !errors.Is(err, weft.ErrIDInUse) || !strings.Contains(err.Error(), `belongs to workflow "once"`) {
		t.Errorf("Start of another workflow with a used id: %v, want ErrIDInUse naming the workflow", err)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ctx := context.Background()
	_, _, err := h.e.SaveDefinition(ctx, []byte(`
name: bad
steps: [ { id: x, activity: nope.echo }, { id: x, activity: kit.missing } ]
`))
	var ve *weft.DefinitionError
	if !errors.As(err, &ve) || len(ve.Problems) < 3 {
		t.Fatalf("SaveDefinition: %v, want every problem (unknown plugin, duplicate id, unknown activity)", err)
	}
	if _, _, err := h.e.Start(ctx, "no-such-workflow", nil, ""); !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("Start of an unknown workflow: %v, want ErrNotFound", err)
	}
}

func TestHistoryDataIsJSON(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: h
steps: [ { id: f, activity: kit.fail, input: { code: nope }, retry: { max_attempts: 1 } } ]
`)
	inst := h.finish("h", nil)
	for _, e := range h.history(inst.ID) {
		if e.Type == "activity_failed" {
			var d map[string]any
			if err := json.Unmarshal(e.Data, &d); err != nil || d["code"] != "nope" {
				t.Fatalf("activity_failed data %s: %v", e.Data, err)
			}
			return
		}
	}
	t.Fatal("no activity_failed event")
}

func TestWaitAnswersWhenSuspended(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(`
name: slow
steps:
  - { id: first, activity: kit.echo }
  - { id: nap, delay: 1h }
`)
	inst, _, err := h.e.Start(context.Background(), "slow", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got, err := h.e.Wait(ctx, inst.ID)
	if err != nil || got.Status != weft.StatusSuspended {
		t.Fatalf("Wait: %v, %v; want suspended on its timer", got.Status, err)
	}
	timers, err := h.store.Timers(ctx, inst.ID)
	if err != nil || len(timers) != 1 || timers[0].Due.Before(time.Now().Add(59*time.Minute)) {
		t.Fatalf("timers %+v, %v; want one due in an hour", timers, err)
	}
}

// logRecorder is a slog.Handler that reports records whose "err" attribute
// matches one of the targets.
type logRecorder struct {
	targets []error
	seen    chan string
}

func (r logRecorder) Enabled(context.Context, slog.Level) bool { return true }
func (r logRecorder) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r logRecorder) WithGroup(string) slog.Handler            { return r }
func (r logRecorder) Handle(_ context.Context, rec slog.Record) error {
	rec.Attrs(func(a slog.Attr) bool {
		if err, ok := a.Value.Any().(error); ok {
			for _, target := range r.targets {
				if errors.Is(err, target) {
					select {
					case r.seen <- err.Error():
					default:
					}
				}
			}
		}
		return true
	})
	return nil
}

// A node whose instance was taken over (a higher fencing token) cannot
// overwrite the newer state: it stops, either because its lease renewal
// fails first or because its commit is refused (docs/architecture.md,
// "Locks and fencing").
func TestFencedWriterCannotOverwrite(t *testing.T) {
	t.Parallel()
	rec := logRecorder{targets: []error{weft.ErrFenced, engine.ErrLeaseLost}, seen: make(chan string, 1)}
	h := newHost(t, withConfig(engine.Config{NodeID: "slow-node", Logger: slog.New(rec)}))
	h.save(`
name: long
persistence: activity
steps:
  - { id: first, activity: kit.echo }
  - { id: work, activity: kit.work, input: { ms: 1500, beat_ms: 50 } }
`)
	ctx := context.Background()
	inst, _, err := h.e.Start(ctx, "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// Wait until the engine has stored it running (after the first
	// activity; the second takes 1.5s), then take it over as another node
	// would after the lease expired.
	var running *weft.Instance
	deadline := time.Now().Add(30 * time.Second)
	for running == nil || running.Status != weft.StatusRunning {
		if time.Now().After(deadline) {
			t.Fatal("instance never ran")
		}
		time.Sleep(time.Millisecond) // polling with a deadline
		if running, err = h.store.GetInstance(ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
	}
	// Take it over as a node does: read, then compare-and-set with a higher
	// fencing token; read again if the engine committed in between.
	var rev uint64
	for {
		taken := *running
		taken.Vars = json.RawMessage(`{"taken_over":true}`)
		taken.Lease = weft.Lease{Node: "other-node", Boot: "b", Expiry: time.Now().Add(time.Hour)}
		rev, err = h.store.Commit(ctx, store.Commit{Instance: &taken, Fence: running.Fence + 1_000_000})
		if err == nil {
			break
		}
		if !errors.Is(err, weft.ErrConflict) || time.Now().After(deadline) {
			t.Fatalf("takeover: %v", err)
		}
		if running, err = h.store.GetInstance(ctx, inst.ID); err != nil {
			t.Fatal(err)
		}
		if running.Status != weft.StatusRunning {
			t.Fatalf("instance %s before the takeover could happen", running.Status)
		}
	}
	select {
	case msg := <-rec.seen:
		t.Logf("engine stopped: %s", msg)
	case <-time.After(30 * time.Second):
		t.Fatal("the engine did not stop after the takeover")
	}
	got, err := h.store.GetInstance(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.Rev != rev || string(got.Vars) != `{"taken_over":true}` || got.Lease.Node != "other-node" {
		t.Fatalf("instance after the refused commit: rev %d vars %s lease %+v; want the takeover's (rev %d)", got.Rev, got.Vars, got.Lease, rev)
	}
}

// TestVersionSavedWithDuplicateKeysStillRuns: a version stored before the
// parser refused duplicate keys (written to the store here as an earlier
// host saved it) still starts and runs, with the last key winning as it
// did then; saving such a definition now is refused.
func TestVersionSavedWithDuplicateKeysStillRuns(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	src := []byte("name: dup\nsteps:\n  - id: up\n    activity: kit.upper\n    input: { text: a }\n    input: { text: b }\n    output: up\noutput: \"${ vars.up.text }\"\n")
	if _, _, err := h.e.SaveDefinition(context.Background(), src); !errors.Is(err, weft.ErrInvalidDefinition) || !strings.Contains(err.Error(), `duplicate key "input"`) {
		t.Fatalf("SaveDefinition of a definition with a duplicate key: %v", err)
	}
	if _, _, err := h.store.PutDefinition(context.Background(), "dup", "saved-before", src); err != nil {
		t.Fatal(err)
	}
	got := h.finish("dup", nil)
	if got.Status != weft.StatusCompleted || string(got.Output) != `"B"` {
		t.Fatalf("instance %s is %s with output %s, error %+v; want completed with \"B\"", got.ID, got.Status, got.Output, got.Error)
	}
}

// TestNonFiniteExpressionFailsTheStepAtOnce: an expression whose result
// JSON cannot hold (expr's / divides as floats, so 1/0 is +Inf) fails its
// step, and the instance, when it is evaluated: with the code
// "expression" and a message naming the step, the field and the
// expression. It is the definition's own error and would be the same at
// every attempt, so no attempt runs and nothing is retried (the retry
// policy here would suspend the instance for an hour). Before, the
// activity's input reached the engine as +Inf, failed to encode, and was
// retried as a host failure; a variable or an output holding one could
// not be committed at all.
func TestNonFiniteExpressionFailsTheStepAtOnce(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	tests := []struct {
		name, def string
		path      string
		message   []string
	}{
		{"activity input", `
name: div-input
steps:
  - id: div
    activity: kit.echo
    input: { ratio: "${ 1/0 }" }
    retry: { max_attempts: 5, initial_interval: 1h }
`, "steps[0]", []string{`step "div", input: expression "${ 1/0 }"`, "+Inf"}},
		{"set", `
name: div-set
steps:
  - { id: calc, set: { ratio: "${ [1, 0/0] }" } }
`, "steps[0]", []string{`step "calc", set ratio: expression "${ [1, 0/0] }"`, "NaN at [1]"}},
		{"child input", `
name: div-child
steps:
  - { id: sub, workflow: div-set, input: "${ {a: {b: -1/0}} }" }
`, "steps[0]", []string{`step "sub", input: expression "${ {a: {b: -1/0}} }"`, "-Inf at a.b"}},
		{"output", `
name: div-output
steps:
  - { id: one, set: { x: 1 } }
output: "${ vars.x / 0 }"
`, "", []string{`output: expression "${ vars.x / 0 }"`, "+Inf"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h.save(tt.def)
			name := strings.Fields(tt.def)[1]
			inst, _, err := h.e.Start(context.Background(), name, nil, "")
			if err != nil {
				t.Fatalf("Start %s: %v", name, err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			// Wait answers at a suspension too: a retry's backoff would
			// show as one.
			got, err := h.e.Wait(ctx, inst.ID)
			if err != nil {
				t.Fatalf("Wait for instance %s: %v", inst.ID, err)
			}
			if got.Status != weft.StatusFailed || got.Error == nil || got.Error.Code != "expression" {
				t.Fatalf("instance %s is %s with error %+v; want failed with code expression", inst.ID, got.Status, got.Error)
			}
			for _, m := range tt.message {
				if !strings.Contains(got.Error.Message, m) {
					t.Errorf("instance %s: error message %q does not contain %q", inst.ID, got.Error.Message, m)
				}
			}
			evs := h.history(inst.ID)
			for _, typ := range []weft.HistoryType{weft.HistoryActivityScheduled, weft.HistoryActivityFailed, weft.HistoryRetryScheduled} {
				if n := count(evs, typ); n != 0 {
					t.Errorf("instance %s: %d %s events: %v", inst.ID, n, typ, types(evs))
				}
			}
			if count(evs, "instance_failed") != 1 {
				t.Errorf("instance %s: history %v, want one instance_failed", inst.ID, types(evs))
			}
			if tt.path != "" {
				if count(evs, "step_failed") != 1 || evs[len(evs)-1].StepPath != tt.path {
					t.Errorf("instance %s: history %v, want one step_failed at %s", inst.ID, types(evs), tt.path)
				}
			}
		})
	}
}

// TestCancelledChildSaysWhyToItsParent: a child cancelled on its own ends
// with the error {cancelled, reason}; its parent's workflow step fails with
// the code cancelled and a message naming the child and the reason.
func TestCancelledChildSaysWhyToItsParent(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parent, child := startHolder(ctx, t, h, "holder-1")
	if child.Parent == nil || child.Parent.InstanceID != parent.ID || child.Parent.StepID != "sub" || child.Parent.Token == "" {
		t.Fatalf("child %s has parent %+v, want instance %s, step sub and the wait's token", child.ID, child.Parent, parent.ID)
	}
	if _, err := h.e.Cancel(ctx, child.ID, weft.Operation{Reason: "no longer needed"}); err != nil {
		t.Fatalf("Cancel %s: %v", child.ID, err)
	}
	got, err := h.e.WaitFinished(ctx, child.ID)
	if err != nil {
		t.Fatalf("WaitFinished %s: %v", child.ID, err)
	}
	if got.Status != weft.StatusCancelled || got.Error == nil || got.Error.Code != "cancelled" || got.Error.Message != "no longer needed" {
		t.Fatalf("child %s is %s with error %+v, want cancelled with the reason", child.ID, got.Status, got.Error)
	}
	got, err = h.e.WaitFinished(ctx, parent.ID)
	if err != nil {
		t.Fatalf("WaitFinished %s: %v", parent.ID, err)
	}
	want := "child workflow failed: child " + child.ID + " cancelled: no longer needed"
	if got.Status != weft.StatusFailed || got.Error == nil || got.Error.Code != "cancelled" || got.Error.Message != want {
		t.Fatalf("parent %s is %s with error %+v, want failed with code cancelled and message %q", parent.ID, got.Status, got.Error, want)
	}
}

// startHolder saves holder, whose step sub starts a child of held, which
// waits; it starts holder as id and answers it and its child, suspended.
func startHolder(ctx context.Context, t *testing.T, h *host, id string) (parent *weft.Instance, child *weft.Instance) {
	t.Helper()
	h.save("name: held\nsteps: [{id: review, wait: {event: held.go, key: fixed}}]\n")
	h.save("name: holder\nsteps: [{id: sub, workflow: held}]\n")
	parent, _, err := h.e.Start(ctx, "holder", nil, id)
	if err != nil {
		t.Fatal(err)
	}
	return parent, suspendedChild(ctx, t, h, parent.ID)
}

// suspendedChild waits, up to ctx's deadline, for the child of workflow
// held that instance parent started to suspend, and returns it.
func suspendedChild(ctx context.Context, t *testing.T, h *host, parent string) *weft.Instance {
	t.Helper()
	for {
		items, _, err := h.store.ListInstances(ctx, weft.InstanceFilter{Workflow: "held", Status: weft.StatusSuspended})
		if err != nil {
			t.Fatal(err)
		}
		for i := range items {
			if items[i].Parent != nil && items[i].Parent.InstanceID == parent {
				return &items[i]
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no suspended child of instance %s: %v", parent, ctx.Err())
		case <-time.After(5 * time.Millisecond): // polling with a deadline
		}
	}
}

// TestChildStoredWithTheOldParentRefReachesItsParent: a child stored
// before ParentRef kept the wait's token apart held it in StepID; its end
// still reaches the parent's wait.
func TestChildStoredWithTheOldParentRefReachesItsParent(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parent, child := startHolder(ctx, t, h, "holder-old")
	st, err := h.e.Export(ctx, child.ID)
	if err != nil {
		t.Fatal(err)
	}
	st.Instance.Parent = &weft.ParentRef{InstanceID: parent.ID, StepID: child.Parent.Token}
	if _, _, err := h.e.Import(ctx, st, engine.ImportOptions{Replace: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.e.Cancel(ctx, child.ID, weft.Operation{Reason: "old record"}); err != nil {
		t.Fatalf("Cancel %s: %v", child.ID, err)
	}
	got, err := h.e.WaitFinished(ctx, parent.ID)
	if err != nil {
		t.Fatalf("WaitFinished %s: %v", parent.ID, err)
	}
	if got.Status != weft.StatusFailed || got.Error == nil || got.Error.Code != "cancelled" {
		t.Fatalf("parent %s is %s with error %+v, want failed by its cancelled child", parent.ID, got.Status, got.Error)
	}
}

// TestHeartbeatTimeoutOverTheConfiguredDefaultIsRefused: saving checks a
// heartbeat_timeout on a step without a timeout against the engine's own
// ActivityTimeout, which bounds such a step's attempts, not against the
// package's default.
func TestHeartbeatTimeoutOverTheConfiguredDefaultIsRefused(t *testing.T) {
	t.Parallel()
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, ActivityTimeout: 30 * time.Second}))
	def := func(hb string) []byte {
		return []byte("name: beat\nsteps:\n  - id: poll\n    activity: kit.work\n    heartbeat_timeout: " + hb + "\n")
	}
	_, _, err := h.e.SaveDefinition(context.Background(), def("1m"))
	var ve *weft.DefinitionError
	if !errors.As(err, &ve) || len(ve.Problems) != 1 {
		t.Fatalf("SaveDefinition with heartbeat_timeout 1m and a 30s default timeout: %v, want one problem", err)
	}
	if p := ve.Problems[0]; p.Path != "steps[0].heartbeat_timeout" || !strings.Contains(p.Message, "heartbeat_timeout 1m0s is larger than timeout 30s, the host's default") {
		t.Fatalf("problem %+v", p)
	}
	if _, _, err := h.e.SaveDefinition(context.Background(), def("20s")); err != nil {
		t.Fatalf("SaveDefinition with heartbeat_timeout 20s and a 30s default timeout: %v", err)
	}
}

// sneakingStore writes a note into an instance's inbox, without waking
// anyone, right after the execution's first read of that inbox: as a
// message from a node whose notification was lost.
type sneakingStore struct {
	store.Store
	once sync.Once
}

// GetInstance writes a message into the inbox of the first pending
// instance it reads, after reading it, and wakes nobody.
func (s *sneakingStore) GetInstance(ctx context.Context, id string) (*weft.Instance, error) {
	in, err := s.Store.GetInstance(ctx, id)
	if err != nil || in.Status != weft.StatusPending {
		return in, err
	}
	s.once.Do(func() {
		note := `{"type":"late_completion_refused","outcome":"completed","step_path":"steps[9]","attempt":1,"node":"elsewhere","reason":"test"}`
		if _, err := s.Store.Deliver(ctx, nil, []weft.Message{{InstanceID: id, ID: "sneaked", Kind: weft.MessageNote, Payload: json.RawMessage(note)}}); err != nil {
			panic(err)
		}
	})
	return in, err
}

// TestFinalCommitAppliesAMessageThatDidNotWakeTheRun: a run that finds the
// inbox empty (InboxWaiting) does not read it before its last commit,
// which drains it: a message written meanwhile without a wake-up refuses
// that commit, and is applied before the instance finishes.
func TestFinalCommitAppliesAMessageThatDidNotWakeTheRun(t *testing.T) {
	t.Parallel()
	sneak := &sneakingStore{}
	h := newHost(t, withStore(func(st store.Store) store.Store { sneak.Store = st; return sneak }))
	h.save(echoWorkflow)
	inst := h.finish("echo", 1)
	if inst.Status != weft.StatusCompleted {
		t.Fatalf("instance %s", inst.Status)
	}
	if n := count(h.history(inst.ID), weft.HistoryLateCompletionRefused); n != 1 {
		t.Errorf("the sneaked note is in the history %d times, want once: %v", n, types(h.history(inst.ID)))
	}
	msgs, err := h.store.Inbox(context.Background(), inst.ID)
	if err != nil || len(msgs) != 0 {
		t.Errorf("inbox after the end: %v, %v", msgs, err)
	}
}

// flakyReads fails the engine's first reads of instances, recording when
// each read came.
type flakyReads struct {
	store.Store
	mu    sync.Mutex
	fails int
	at    []time.Time
}

func (s *flakyReads) GetInstance(ctx context.Context, id string) (*weft.Instance, error) {
	s.mu.Lock()
	s.at = append(s.at, time.Now())
	fail := s.fails > 0
	s.fails--
	s.mu.Unlock()
	if fail {
		return nil, errors.New("disk on fire")
	}
	return s.Store.GetInstance(ctx, id)
}

// TestFailingRunsBackOff: an instance whose runs keep failing is run again
// after RecoveryInterval, then twice as long after each further failure,
// and finishes once its runs stop failing.
func TestFailingRunsBackOff(t *testing.T) {
	t.Parallel()
	const interval = 20 * time.Millisecond
	flaky := &flakyReads{fails: 4}
	h := newHost(t,
		withStore(func(st store.Store) store.Store { flaky.Store = st; return flaky }),
		withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, RecoveryInterval: interval}))
	h.save(echoWorkflow)
	inst, _, err := h.e.Start(context.Background(), "echo", json.RawMessage(`1`), "")
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := h.store.GetInstance(context.Background(), inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status == weft.StatusCompleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %s after 30 s", inst.ID, got.Status)
		}
		time.Sleep(5 * time.Millisecond)
	}
	flaky.mu.Lock()
	defer flaky.mu.Unlock()
	if len(flaky.at) < 5 {
		t.Fatalf("%d runs, want 4 failed and 1 more", len(flaky.at))
	}
	// The timers fire no earlier than asked; a slow machine only adds.
	for i := 1; i <= 4; i++ {
		want := interval << (i - 1)
		if gap := flaky.at[i].Sub(flaky.at[i-1]); gap < want {
			t.Errorf("run %d came %s after run %d, want at least %s", i+1, gap, i, want)
		}
	}
}
