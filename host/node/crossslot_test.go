package node_test

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
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
// the stimulus is queued first, then consumed), a child workflow, a pause
// and resume with an event held meanwhile, a forced delete of a plugin
// that a paused instance pins (refused), one signal that resumes six
// instances, batch jobs that signal and cancel, listings page by page and
// counts, a paused workflow whose held start a resume releases, a schedule
// firing every second, and retention deleting a finished instance.
// Everything completes, once; then the watch, the servers' error counts
// and the nodes' logs show no cross-slot error. Last, a cross-slot script
// sent on purpose shows that the watch and the servers' counts do catch
// one.
//
// It runs twice, one layout after the other: the whole store under one
// hash tag, and the store in eight partitions (RedisPartitions) spread
// over the three masters. There what spans partitions runs protocols of
// several commands, each of which must stay in one slot: a child's end
// relayed to its parent in another partition through an outbox, a signal
// delivered to instances of every master through the catalog's outbox, a
// queued stimulus reserved in the catalog for a commit in a partition, a
// batch's items applied through the catalog's outbox, a plugin delete
// that fences every partition and asks each for its pins, listings merged
// over the partitions and counts summed, and the relay loop that runs
// every second on each node.
//
// A script that reads an undeclared key of another slot of its own master
// is not refused by Redis (scripts without flags keep that leeway), so this
// test cannot see such an access; it would fail once the slots move apart.
func TestEngineOnAClusterSendsNoCrossSlotCommand(t *testing.T) {
	t.Parallel()
	// One after the other: each starts three redis-servers and two nodes.
	for _, tc := range []struct {
		name       string
		partitions int
	}{
		{"whole", 0},
		{"partitions=8", 8},
	} {
		t.Run(tc.name, func(t *testing.T) { engineOnACluster(t, tc.partitions) })
	}
}

// engineOnACluster runs TestEngineOnAClusterSendsNoCrossSlotCommand with
// the store in partitions (0: the whole store).
func engineOnACluster(t *testing.T, partitions int) {
	cl := redistest.StartClusterOf(t, 3, 0)
	watch := &crossSlotWatch{}
	openNode := func(id string) (*node.Node, *logtest.Buffer) {
		cfg := clusterConfig(t, id)
		cfg.RedisCluster = cl.Addrs()
		// The ready queue and the notifications in shards, as a
		// deployment on a cluster runs them: their scripts and sharded
		// pub/sub are under the watch too.
		cfg.RedisShards = 4
		cfg.RedisPartitions = partitions
		cfg.Engine.RetentionInterval = 200 * time.Millisecond
		n, logs, _ := open(t, node.WithRedisHook(cfg, watch))
		return n, logs
	}
	a, logsA := openNode("a")
	b, logsB := openNode("b")
	ctx := context.Background()
	// Where the partitions live, to check that the workload crosses them
	// (nil for the whole store).
	var layout *storeLayout
	if partitions > 1 {
		layout = layoutOf(t, cl, partitions)
		t.Logf("the store's layout: %s", layout)
	}
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
	signal := func(n *node.Node, event, key string, payload any) *weft.SignalOutcome {
		t.Helper()
		out, err := n.Engine().Signal(ctx, weft.Event{Name: event, Key: key, Payload: payload})
		if err != nil {
			t.Fatalf("signalling %s %s: %v", event, key, err)
		}
		return out
	}
	get := func(id string) *weft.Instance {
		t.Helper()
		inst, err := a.Store().GetInstance(ctx, id)
		if err != nil {
			t.Fatalf("reading %s: %v", id, err)
		}
		return inst
	}
	history := func(id string) []weft.HistoryEntry {
		t.Helper()
		hist, err := b.Store().History(ctx, id, 0, 1000)
		if err != nil {
			t.Fatalf("history of %s: %v", id, err)
		}
		return hist
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
	// once checks that id's history has exactly one entry of typ: what a
	// message relayed twice, or a stimulus consumed twice, would repeat.
	once := func(id string, typ weft.HistoryType) {
		t.Helper()
		if hist := history(id); count(hist, typ) != 1 {
			t.Errorf("%s has %d %s entries, want 1:\n%s", id, count(hist, typ), typ, dump(hist))
		}
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
	// begins (after the one-second timer): queued, then consumed by the
	// instance when it reaches the wait (reserved in the catalog first,
	// when the store has partitions).
	queued := map[string]*weft.SignalOutcome{
		"o1": signal(b, "xs.approved", "o1", map[string]string{"by": "b"}),
		"o2": signal(a, "xs.approved", "o2", map[string]string{"by": "a"}),
	}
	for id, out := range queued {
		if !out.Queued || len(out.Resumed) > 0 {
			t.Errorf("the approval of %s was answered %+v, want queued: sent before the wait began", id, out)
		}
	}
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
	// A plugin that an unfinished instance pins is not deleted, even
	// forced: o3 pins kit. With partitions, the delete fences every
	// partition and asks each which instances pin it.
	var inUse *weft.InUseError
	if err := b.DeletePlugin(ctx, "kit", true); !errors.As(err, &inUse) || !slices.Contains(inUse.Instances, "o3") {
		t.Fatalf("a forced delete of kit, which o3 pins, answered %v; want in use by o3", err)
	}
	if _, err := a.GetPlugin(ctx, "kit"); err != nil {
		t.Fatalf("kit after its refused delete: %v", err)
	}
	signal(a, "xs.approved", "o3", map[string]string{"by": "a"})
	within(t, time.Minute, "o3 holds its event", func() bool {
		hist, err := a.Store().History(ctx, "o3", 0, 1000)
		return err == nil && count(hist, weft.HistoryEventHeld) == 1
	})
	if _, err := a.Engine().Resume(ctx, "o3", op); err != nil {
		t.Fatalf("resuming o3: %v", err)
	}
	var children []string
	for _, o := range orders {
		inst := finished(o.id, weft.StatusCompleted)
		want := fmt.Sprintf(`{"by":"%s","child":"%s"}`, map[*node.Node]string{a: "b", b: "a"}[o.via], strings.ToUpper(o.customer))
		if o.id == "o3" {
			want = `{"by":"a","child":"GLOBEX"}`
		}
		if got := compactJSON(t, inst.Output); got != want {
			t.Errorf("%s: output %s, want %s", o.id, got, want)
		}
		// The child's end reached its parent once.
		child := childOf(t, o.id, history(o.id))
		children = append(children, child)
		finished(child, weft.StatusCompleted)
		once(o.id, weft.HistoryChildCompleted)
	}
	// The queued approvals were consumed once, by the instance they name.
	for id, out := range queued {
		st, err := b.Store().GetStimulus(ctx, out.ID)
		if err != nil {
			t.Fatalf("reading the approval %s of %s: %v", out.ID, id, err)
		}
		if st.State != weft.StimulusDelivered || st.DeliveredTo != id {
			t.Errorf("the approval %s of %s is %s, delivered to %q; want delivered to %s", out.ID, id, st.State, st.DeliveredTo, id)
		}
	}
	if layout != nil {
		// Each child's end went through an outbox: the children live in
		// other partitions than their parents, some on another master.
		masters := 0
		var where []string
		for i, o := range orders {
			where = append(where, fmt.Sprintf("%s in %d, its child %s in %d", o.id, layout.part(o.id), children[i], layout.part(children[i])))
			if layout.part(children[i]) == layout.part(o.id) {
				t.Errorf("%s and its child %s are both in partition %d: pick ids whose children are in other partitions", o.id, children[i], layout.part(o.id))
			}
			if layout.master(children[i]) != layout.master(o.id) {
				masters++
			}
		}
		if masters == 0 {
			t.Errorf("every order's child %v lives on its parent's master: pick ids that cross masters", children)
		}
		t.Logf("partitions: %s; %d of the children on another master than their parent", strings.Join(where, "; "), masters)
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

	// One signal resumes six instances, spread over the partitions.
	var fan []string
	for i := range 6 {
		id := fmt.Sprintf("f%d", i)
		fan = append(fan, id)
		start([]*node.Node{a, b}[i%2], "xs-hold", id, map[string]string{"k": "fan"})
	}
	if layout != nil {
		on := layout.mastersOf(fan)
		if len(on) < 2 {
			t.Errorf("the fan's instances %v all live on one master: pick ids that spread", fan)
		}
		t.Logf("the fan's instances live on %d masters", len(on))
	}
	within(t, time.Minute, "the fan's six instances wait", func() bool {
		bms, err := a.Store().FindBookmarks(ctx, "xs.go", "fan")
		return err == nil && len(bms) == len(fan)
	})
	out := signal(b, "xs.go", "fan", map[string]string{"by": "fan"})
	if got := slices.Sorted(slices.Values(out.Resumed)); !slices.Equal(got, fan) || out.Queued {
		t.Errorf("the fan's signal answered %+v, want %v resumed", out, fan)
	}
	for _, id := range fan {
		if inst := finished(id, weft.StatusCompleted); compactJSON(t, inst.Output) != `{"by":"fan"}` {
			t.Errorf("%s: output %s, want the fan's payload", id, inst.Output)
		}
		once(id, weft.HistoryBookmarkResumed)
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
		items, err := b.Engine().BatchItems(ctx, bt.ID, weft.BatchItemFilter{Limit: 10})
		if err != nil {
			t.Fatalf("batch %s's items: %v", bt.ID, err)
		}
		done := 0
		for _, it := range items {
			if it.Outcome == weft.BatchDone {
				done++
			}
		}
		if done != 3 || len(items) != 3 {
			t.Errorf("batch %s %s: items %+v, want three, done", bt.ID, doc, items)
		}
	}
	for i := range 3 {
		h, d := fmt.Sprintf("h%d", i), fmt.Sprintf("d%d", i)
		if inst := finished(h, weft.StatusCompleted); compactJSON(t, inst.Output) != `{"by":"batch"}` {
			t.Errorf("%s: output %s, want the batch's payload", h, inst.Output)
		}
		once(h, weft.HistoryBookmarkResumed)
		finished(d, weft.StatusCancelled)
		once(d, weft.HistoryInstanceCancelled)
	}
	if _, _, err := b.Engine().ListBatches(ctx, "", 10); err != nil {
		t.Errorf("listing batches: %v", err)
	}

	// Listings page by page, merged over the partitions, and counts:
	// every instance so far, once, in order.
	all := []string{"d0", "d1", "d2", "h0", "h1", "h2", "o1", "o2", "o3"}
	all = append(all, fan...)
	all = append(all, children...)
	slices.Sort(all)
	holds := []string{"f0", "f1", "f2", "f3", "f4", "f5", "h0", "h1", "h2"}
	for _, tc := range []struct {
		what  string
		f     weft.InstanceFilter
		query string
		want  []string
		// inOrder: want is in the listing's order; else the listing
		// is checked against the creation order.
		inOrder bool
	}{
		{"every instance", weft.InstanceFilter{Limit: 4}, "", all, false},
		{"every instance, newest first", weft.InstanceFilter{Limit: 5, NewestFirst: true}, "", all, false},
		{"xs-hold's completed", weft.InstanceFilter{Limit: 2, Workflow: "xs-hold", Status: weft.StatusCompleted}, "", holds, false},
		{"a search reading four at most per call", weft.InstanceFilter{Limit: 3, Examine: 4}, `workflow = "xs-hold" OR workflow = "xs-doomed"`, append(slices.Clone(holds), "d0", "d1", "d2"), false},
		{"the orders by amount", weft.InstanceFilter{Limit: 1}, `amount >= 0`, []string{"o2", "o1", "o3"}, true},
	} {
		got := listAll(t, a, tc.query, tc.f)
		switch {
		case tc.inOrder && !slices.Equal(ids(got), tc.want):
			t.Errorf("listing %s: %v, want %v", tc.what, ids(got), tc.want)
		case !tc.inOrder && !slices.Equal(slices.Sorted(slices.Values(ids(got))), slices.Sorted(slices.Values(tc.want))):
			t.Errorf("listing %s: %v, want %v in any order", tc.what, ids(got), tc.want)
		case !tc.inOrder && !inOrder(got, tc.f.NewestFirst):
			t.Errorf("listing %s: %v, not in creation order", tc.what, ids(got))
		}
	}
	for wf, want := range map[string]map[weft.Status]int{
		"xs-hold":   {weft.StatusCompleted: len(holds)},
		"xs-doomed": {weft.StatusCancelled: 3},
		"xs-order":  {weft.StatusCompleted: 3},
		"greet":     {weft.StatusCompleted: 3},
		"":          {weft.StatusCompleted: len(all) - 3, weft.StatusCancelled: 3},
	} {
		got, err := b.CountInstances(ctx, wf)
		if err != nil {
			t.Fatalf("counting the instances of %q: %v", wf, err)
		}
		if !maps.Equal(got, want) {
			t.Errorf("counting the instances of %q: %v, want %v", wf, got, want)
		}
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

// childOf returns the id of the child workflow that parent's history
// (hist) says it started.
func childOf(t *testing.T, parent string, hist []weft.HistoryEntry) string {
	t.Helper()
	for _, ev := range hist {
		if ev.Type != weft.HistoryChildStarted {
			continue
		}
		var data struct {
			Instance string `json:"instance"`
		}
		if err := json.Unmarshal(ev.Data, &data); err != nil || data.Instance == "" {
			t.Fatalf("%s's child_started entry %s: %v", parent, ev.Data, err)
		}
		return data.Instance
	}
	t.Fatalf("%s started no child:\n%s", parent, dump(hist))
	return ""
}

// listAll reads every page of a listing through n, of a search when query
// is not empty, and fails the test when it does not end within 100 pages
// or lists an instance twice.
func listAll(t *testing.T, n *node.Node, query string, f weft.InstanceFilter) []weft.Instance {
	t.Helper()
	ctx := context.Background()
	var all []weft.Instance
	seen := map[string]bool{}
	for range 100 {
		var page []weft.Instance
		var next string
		var err error
		if query != "" {
			page, next, err = n.SearchInstances(ctx, query, f)
		} else {
			page, next, err = n.Instances(ctx, f)
		}
		if err != nil {
			t.Fatalf("listing %+v %q after %d instances: %v", f, query, len(all), err)
		}
		for _, in := range page {
			if seen[in.ID] {
				t.Errorf("listing %+v %q: %s listed twice", f, query, in.ID)
			}
			seen[in.ID] = true
		}
		all = append(all, page...)
		if next == "" {
			return all
		}
		f.Cursor = next
	}
	t.Fatalf("listing %+v %q: no end within 100 pages (%d instances)", f, query, len(all))
	return nil
}

// inOrder reports whether insts are in creation order (by CreatedAt, then
// ID), the newest first when newestFirst.
func inOrder(insts []weft.Instance, newestFirst bool) bool {
	return slices.IsSortedFunc(insts, func(x, y weft.Instance) int {
		c := cmp.Or(x.CreatedAt.Compare(y.CreatedAt), cmp.Compare(x.ID, y.ID))
		if newestFirst {
			return -c
		}
		return c
	})
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
