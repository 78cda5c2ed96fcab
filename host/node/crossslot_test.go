package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/batch"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
)

// crossSlotSigns are what Redis and go-redis say when one command (or one
// script, transaction or WATCH) names keys of two hash slots: the server's
// CROSSSLOT for declared keys; a script's access to an undeclared key of a
// slot another master serves ("non local key") or of another slot of its
// own master ("do not hash to the same slot"); go-redis's client-side
// refusal of a cross-slot transaction (redis.ErrCrossSlot, which says
// CROSSSLOT) and of a cross-slot WATCH, which it returns before any hook
// runs, so only the caller's error (and the node's log) carries it.
var crossSlotSigns = []string{
	"CROSSSLOT",
	"non local key",
	"do not hash to the same slot",
	"Watch requires all keys to be in the same slot",
}

// isCrossSlot reports whether err says that keys of two slots met.
func isCrossSlot(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, redis.ErrCrossSlot) {
		return true
	}
	msg := err.Error()
	for _, s := range crossSlotSigns {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// TestIsCrossSlot: the watch recognises what the server and go-redis say
// of keys of two slots, wrapped as the store wraps errors, and nothing
// else a cluster answers.
func TestIsCrossSlot(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{redis.ErrCrossSlot, true},
		{fmt.Errorf("redisstore: commit of instance x: %w", redis.ErrCrossSlot), true},
		{errors.New("CROSSSLOT Keys in request don't hash to the same slot"), true},
		{errors.New("ERR Error running script (call to f_1234): @user_script:3: Script attempted to access a non local key in a cluster node script"), true},
		{errors.New("ERR Script attempted to access keys that do not hash to the same slot"), true},
		{errors.New("redis: Watch requires all keys to be in the same slot"), true},
		{nil, false},
		{errors.New("MOVED 3999 127.0.0.1:6381"), false},
		{errors.New("ASK 3999 127.0.0.1:6381"), false},
		{errors.New("NOSCRIPT No matching script. Please use EVAL."), false},
		{errors.New("CLUSTERDOWN The cluster is down"), false},
		{redis.Nil, false},
		{context.DeadlineExceeded, false},
	} {
		if got := isCrossSlot(tc.err); got != tc.want {
			t.Errorf("isCrossSlot(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

// crossSlotWatch is a redis.Hook that records every command whose error
// says keys of two slots met (isCrossSlot), and counts the commands it saw.
type crossSlotWatch struct {
	commands atomic.Int64

	mu   sync.Mutex
	seen []string // "COMMAND args…: error", the first few
	n    int      // how many, all told
}

// DialHook watches nothing: dialling names no key.
func (w *crossSlotWatch) DialHook(next redis.DialHook) redis.DialHook { return next }

// ProcessHook checks the command once it has its answer.
func (w *crossSlotWatch) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		w.commands.Add(1)
		w.check(cmd.String(), cmd.Err())
		return err
	}
}

// ProcessPipelineHook checks each command of a pipeline or transaction,
// and the pipeline's own error (a transaction refused whole).
func (w *crossSlotWatch) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		w.commands.Add(int64(len(cmds)))
		for _, c := range cmds {
			w.check(c.String(), c.Err())
		}
		if err != nil && !isCrossSlot(firstErr(cmds)) {
			w.check(fmt.Sprintf("pipeline of %d commands", len(cmds)), err)
		}
		return err
	}
}

// firstErr is the first error of cmds, nil when none failed.
func firstErr(cmds []redis.Cmder) error {
	for _, c := range cmds {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}

// check records what when err says keys of two slots met.
func (w *crossSlotWatch) check(what string, err error) {
	if !isCrossSlot(err) {
		return
	}
	const keep = 10
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if len(w.seen) < keep {
		if len(what) > 300 {
			what = what[:300] + "…"
		}
		w.seen = append(w.seen, what)
	}
}

// report returns how many cross-slot errors the watch saw, and the first
// few.
func (w *crossSlotWatch) report() (int, []string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n, append([]string(nil), w.seen...)
}

// crossSlotErrors sums, over every node of the cluster, the CROSSSLOT
// errors the server answered (INFO errorstats): the commands of every
// client, those a hook cannot see (a sharded subscription) among them.
func crossSlotErrors(t *testing.T, cl *redistest.Cluster) int {
	t.Helper()
	ctx := context.Background()
	total := 0
	for _, s := range cl.Nodes() {
		info, err := s.Client(t).Info(ctx, "errorstats").Result()
		if err != nil {
			t.Fatalf("INFO errorstats on %s: %v", s.Addr(), err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			v, ok := strings.CutPrefix(strings.TrimSpace(line), "errorstat_CROSSSLOT:count=")
			if !ok {
				continue
			}
			n, err := strconv.Atoi(strings.SplitN(v, ",", 2)[0])
			if err != nil {
				t.Fatalf("INFO errorstats on %s: %q: %v", s.Addr(), line, err)
			}
			total += n
		}
	}
	return total
}

// crossSlotLines returns the lines of logs that say keys of two slots met.
func crossSlotLines(logs *logtest.Buffer) []string {
	var out []string
	for line := range strings.SplitSeq(logs.String(), "\n") {
		if isCrossSlot(errors.New(line)) {
			out = append(out, line)
		}
	}
	return out
}

// The workflows of TestEngineOnAClusterSendsNoCrossSlotCommand, beside
// greet: an order with a concurrency key, search attributes, a rate-limited
// activity, a timer, a wait for an event and a child workflow; a wait for
// batch jobs to signal or cancel; and a brief one that its retention
// deletes a second after it ends.
const (
	xsOrder = `
name: xs-order
persistence: activity
concurrency: { key: "${ input.customer }", limit: 1 }
search:
  customer: { type: string, value: "${ input.customer }" }
  amount:   { type: number, value: "${ input.amount }" }
steps:
  - id: up
    activity: kit.upper
    input: { text: "${ input.customer }" }
    output: up
    rate_limit: { key: "xs-${ input.customer }", limit: 100, per: 1s, burst: 100 }
  - { id: nap, delay: 1s }
  - { id: approval, wait: { event: xs.approved, key: "${ input.id }" }, output: approval }
  - { id: child, workflow: greet, input: "${ vars.up.text }", output: child }
output: { child: "${ vars.child }", by: "${ vars.approval.by }" }
`
	xsHold = `
name: xs-hold
steps:
  - { id: w, wait: { event: xs.go, key: "${ input.k }" }, output: got }
output: "${ vars.got }"
`
	xsBrief = `
name: xs-brief
retention: 1s
steps:
  - { id: e, activity: kit.echo, input: "${ input }", output: e }
output: "${ vars.e }"
`
)

// TestEngineOnAClusterSendsNoCrossSlotCommand runs the engine end to end
// through two nodes on a Redis Cluster of three masters, with a watch on
// every command of their cluster clients (node.WithRedisHook), and fails on
// any command that names keys of two slots: what a single redis-server
// accepts and a cluster refuses (CROSSSLOT), or, in a script, refuses only
// when the other slot lives on another master. It drives workflows with
// activities, a rate limit, a concurrency key, search attributes, a timer,
// a wait signalled through the other node (before the wait begins, so that
// the stimulus is queued first), a child workflow, a pause and resume with
// an event held meanwhile, batch jobs that signal and cancel, a paused
// workflow whose held start a resume releases, a schedule firing every
// second, and retention deleting a finished instance. Everything
// completes; then the watch, the servers' error counts and the nodes'
// logs show no cross-slot error. Last, a cross-slot script sent on
// purpose shows that the watch and the servers' counts do catch one.
//
// A script that reads an undeclared key of another slot of its own master
// is not refused by Redis (scripts without flags keep that leeway), so this
// test cannot see such an access; it would fail once the slots move apart.
func TestEngineOnAClusterSendsNoCrossSlotCommand(t *testing.T) {
	t.Parallel()
	cl := redistest.StartClusterOf(t, 3, 0)
	watch := &crossSlotWatch{}
	openNode := func(id string) (*node.Node, *logtest.Buffer) {
		cfg := clusterConfig(t, id)
		cfg.RedisCluster = cl.Addrs()
		// The ready queue and the notifications in shards, as a
		// deployment on a cluster runs them: their scripts and sharded
		// pub/sub are under the watch too.
		cfg.RedisShards = 4
		cfg.Engine.RetentionInterval = 200 * time.Millisecond
		n, logs, _ := open(t, node.WithRedisHook(cfg, watch))
		return n, logs
	}
	a, logsA := openNode("a")
	b, logsB := openNode("b")
	ctx := context.Background()
	op := weft.Operation{Actor: "test", Reason: "cross-slot test"}
	if _, _, err := a.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	for _, def := range []string{greet, xsOrder, xsHold, xsBrief, strings.Replace(xsHold, "name: xs-hold", "name: xs-doomed", 1)} {
		if _, _, err := a.Engine().SaveDefinition(ctx, []byte(def)); err != nil {
			t.Fatalf("saving %s: %v", strings.TrimSpace(def)[:20], err)
		}
	}
	start := func(n *node.Node, workflow, id string, input any) {
		t.Helper()
		raw, err := json.Marshal(input)
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := n.Engine().Start(ctx, workflow, raw, id); err != nil {
			t.Fatalf("starting %s %s: %v", workflow, id, err)
		}
	}
	signal := func(n *node.Node, event, key string, payload any) {
		t.Helper()
		if _, err := n.Engine().Signal(ctx, weft.Event{Name: event, Key: key, Payload: payload}); err != nil {
			t.Fatalf("signalling %s %s: %v", event, key, err)
		}
	}
	get := func(id string) *weft.Instance {
		t.Helper()
		inst, err := a.Store().GetInstance(ctx, id)
		if err != nil {
			t.Fatalf("reading %s: %v", id, err)
		}
		return inst
	}
	finished := func(id string, want weft.Status) *weft.Instance {
		t.Helper()
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		inst, err := b.Engine().WaitFinished(wctx, id)
		if err != nil {
			t.Fatalf("waiting for %s: %v (now %+v)", id, err, get(id))
		}
		if inst.Status != want {
			t.Fatalf("%s ended %s (%+v), want %s", id, inst.Status, inst.Error, want)
		}
		return inst
	}

	// Orders, through both nodes: o2 waits for acme's slot behind o1.
	orders := []struct {
		id, customer string
		amount       int
		via          *node.Node
	}{{"o1", "acme", 120, a}, {"o2", "acme", 30, b}, {"o3", "globex", 500, a}}
	for _, o := range orders {
		start(o.via, "xs-order", o.id, map[string]any{"id": o.id, "customer": o.customer, "amount": o.amount})
	}
	// Signalled through the node that did not start it, before its wait
	// begins (after the one-second timer): queued, then delivered.
	signal(b, "xs.approved", "o1", map[string]string{"by": "b"})
	signal(a, "xs.approved", "o2", map[string]string{"by": "a"})
	// o3 is paused while it waits; its event is held, and applied on
	// resume.
	within(t, time.Minute, "o3 waits for its approval", func() bool {
		hist, err := a.Store().History(ctx, "o3", 0, 1000)
		return err == nil && count(hist, weft.HistoryBookmarkCreated) == 1 && get("o3").Status == weft.StatusSuspended
	})
	if _, err := b.Engine().Pause(ctx, "o3", op); err != nil {
		t.Fatalf("pausing o3: %v", err)
	}
	within(t, time.Minute, "o3 paused", func() bool { return get("o3").Status == weft.StatusPaused })
	signal(a, "xs.approved", "o3", map[string]string{"by": "a"})
	within(t, time.Minute, "o3 holds its event", func() bool {
		hist, err := a.Store().History(ctx, "o3", 0, 1000)
		return err == nil && count(hist, weft.HistoryEventHeld) == 1
	})
	if _, err := a.Engine().Resume(ctx, "o3", op); err != nil {
		t.Fatalf("resuming o3: %v", err)
	}
	for _, o := range orders {
		inst := finished(o.id, weft.StatusCompleted)
		want := fmt.Sprintf(`{"by":"%s","child":"%s"}`, map[*node.Node]string{a: "b", b: "a"}[o.via], strings.ToUpper(o.customer))
		if o.id == "o3" {
			want = `{"by":"a","child":"GLOBEX"}`
		}
		if got := compactJSON(t, inst.Output); got != want {
			t.Errorf("%s: output %s, want %s", o.id, got, want)
		}
	}
	// Search attributes, read through the other node.
	found, _, err := b.Engine().SearchInstances(ctx, `customer = "acme" AND amount > 100`, weft.InstanceFilter{Limit: 10})
	if err != nil {
		t.Fatalf("searching: %v", err)
	}
	if len(found) != 1 || found[0].ID != "o1" {
		t.Errorf("customer = acme AND amount > 100 found %v, want o1", ids(found))
	}
	if _, _, err := a.Engine().ConcurrencyKeys(ctx, "xs-order", "", 10); err != nil {
		t.Errorf("listing xs-order's concurrency keys: %v", err)
	}

	// Batch jobs: a signal by ids, a cancel by query.
	for i := range 3 {
		start([]*node.Node{a, b}[i%2], "xs-hold", fmt.Sprintf("h%d", i), map[string]string{"k": fmt.Sprintf("k%d", i)})
		start([]*node.Node{b, a}[i%2], "xs-doomed", fmt.Sprintf("d%d", i), map[string]string{"k": fmt.Sprintf("d%d", i)})
	}
	for i := range 3 {
		within(t, time.Minute, "the batch's instances wait", func() bool {
			return get(fmt.Sprintf("h%d", i)).Status == weft.StatusSuspended && get(fmt.Sprintf("d%d", i)).Status == weft.StatusSuspended
		})
	}
	batches := []string{
		`{"op": "signal", "ids": ["h0", "h1", "h2"], "rate": 0, "args": {"event": "xs.go", "payload": {"by": "batch"}}}`,
		`{"op": "cancel", "query": "workflow = \"xs-doomed\"", "rate": 0, "reason": "cross-slot test"}`,
	}
	for i, doc := range batches {
		bt, err := []*node.Node{a, b}[i].Engine().StartBatch(ctx, []byte(doc), "test")
		if err != nil {
			t.Fatalf("starting batch %s: %v", doc, err)
		}
		within(t, time.Minute, "batch "+bt.ID+" done", func() bool {
			got, err := a.Engine().GetBatch(ctx, bt.ID)
			if err != nil {
				return false
			}
			st, err := batch.ParseState(got.State)
			if err != nil {
				t.Fatalf("batch %s: %v", bt.ID, err)
			}
			return st.Phase == batch.PhaseDone
		})
	}
	for i := range 3 {
		if inst := finished(fmt.Sprintf("h%d", i), weft.StatusCompleted); compactJSON(t, inst.Output) != `{"by":"batch"}` {
			t.Errorf("h%d: output %s, want the batch's payload", i, inst.Output)
		}
		finished(fmt.Sprintf("d%d", i), weft.StatusCancelled)
	}
	if _, _, err := b.Engine().ListBatches(ctx, "", 10); err != nil {
		t.Errorf("listing batches: %v", err)
	}

	// A paused workflow holds a start; its resume releases it; the
	// instance's retention deletes it a second after it ends.
	if _, err := a.Engine().PauseWorkflow(ctx, "xs-brief", op); err != nil {
		t.Fatalf("pausing xs-brief: %v", err)
	}
	start(b, "xs-brief", "brief", "short")
	if inst := get("brief"); inst.Hold == nil {
		t.Errorf("brief started while xs-brief was paused: %s without a hold", inst.Status)
	}
	if _, _, err := b.Engine().ResumeWorkflow(ctx, "xs-brief", op, 0); err != nil {
		t.Fatalf("resuming xs-brief: %v", err)
	}
	finished("brief", weft.StatusCompleted)
	within(t, time.Minute, "brief deleted by its retention", func() bool {
		_, err := a.Store().GetInstance(ctx, "brief")
		return errors.Is(err, weft.ErrNotFound)
	})

	// A schedule fires every second, its runs spread over the nodes.
	if _, _, _, err := a.Engine().SaveSchedule(ctx, []byte("id: xs-tick\nworkflow: greet\ninput: tick\nspec: {every: 1s}\n"), "", "test"); err != nil {
		t.Fatalf("saving schedule: %v", err)
	}
	within(t, time.Minute, "two runs of the schedule complete", func() bool {
		runs, _, err := b.Engine().SearchInstances(ctx, `workflow = "greet" AND status = "completed"`, weft.InstanceFilter{Limit: 100})
		if err != nil {
			t.Fatalf("searching the schedule's runs: %v", err)
		}
		n := 0
		for _, r := range runs {
			if strings.HasPrefix(r.ID, "xs-tick@") {
				n++
			}
		}
		return n >= 2
	})
	if err := b.Engine().DeleteSchedule(ctx, "xs-tick"); err != nil {
		t.Errorf("deleting the schedule: %v", err)
	}
	if _, err := a.Engine().WaitedEvents(ctx); err != nil {
		t.Errorf("listing the waited events: %v", err)
	}
	if _, _, err := b.Engine().DeadLetters(ctx, "", 10); err != nil {
		t.Errorf("listing the dead letters: %v", err)
	}

	// Nothing named keys of two slots.
	n, seen := watch.report()
	if n > 0 {
		t.Errorf("%d cross-slot errors among the nodes' commands; the first:\n%s", n, strings.Join(seen, "\n"))
	}
	if n := crossSlotErrors(t, cl); n > 0 {
		t.Errorf("the cluster's servers answered %d CROSSSLOT errors", n)
	}
	for name, logs := range map[string]*logtest.Buffer{"a": logsA, "b": logsB} {
		if lines := crossSlotLines(logs); len(lines) > 0 {
			t.Errorf("node %s logged %d cross-slot errors:\n%s", name, len(lines), strings.Join(lines[:min(len(lines), 5)], "\n"))
		}
	}
	t.Logf("the watch saw %d commands, none across slots", watch.commands.Load())

	// The control: a script over keys of two slots is caught by a watch
	// like the nodes' and counted by the servers.
	control := &crossSlotWatch{}
	cc := cl.Client(t)
	cc.AddHook(control)
	err = cc.Eval(ctx, "return 1", []string{"{xs-a}k", "{xs-b}k"}).Err()
	if !isCrossSlot(err) {
		t.Fatalf("a script over two slots answered %v, want CROSSSLOT", err)
	}
	if n, _ := control.report(); n != 1 {
		t.Errorf("the control watch saw %d cross-slot errors, want 1", n)
	}
	if n := crossSlotErrors(t, cl); n != 1 {
		t.Errorf("after the control the servers count %d CROSSSLOT errors, want 1", n)
	}
}

// compactJSON returns raw compacted, its object keys sorted.
func compactJSON(t *testing.T, raw json.RawMessage) string {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("decoding %s: %v", raw, err)
	}
	out, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// ids returns the ids of insts.
func ids(insts []weft.Instance) []string {
	out := make([]string, len(insts))
	for i, inst := range insts {
		out[i] = inst.ID
	}
	return out
}
