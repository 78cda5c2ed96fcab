package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/plugins"
)

// cluster is several engines ("nodes") over one store and plugin runtime,
// each with its own queue; locks is what they share, or not.
type cluster struct {
	t     *testing.T
	store store.Store
	rt    *plugins.Runtime
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "store"), embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rt := testplugins.Runtime(t, plugins.Config{})
	m, err := rt.Load(context.Background(), testplugins.Bytes(t, "kit"))
	if err != nil {
		t.Fatal(err)
	}
	var acts []string
	for _, a := range m.Activities {
		acts = append(acts, a.Name)
	}
	if _, err := st.PutPlugin(context.Background(), weft.PluginRecord{Name: "kit", Version: m.Version, Size: int64(m.Size), Activities: acts}); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, store: st, rt: rt}
}

// node returns an engine; run starts it, and the returned stop kills it
// (its context ends: no further commits, its lease left to expire).
func (c *cluster) node(name string, locks lock.Locker) (e *engine.Engine, run func() (stop func())) {
	c.t.Helper()
	return c.nodeWith(name, locks, 0)
}

// nodeAt is node with its own locks and the engine's clock shifted by skew.
func (c *cluster) nodeAt(name string, skew time.Duration) (e *engine.Engine, run func() (stop func())) {
	c.t.Helper()
	return c.nodeWith(name, local.New(local.Config{}), skew)
}

// lockTTL is the lock and lease TTL of the cluster tests' nodes: short,
// so that a takeover is quick, and long enough that a node renewing every
// 200 ms on a loaded machine (a race build, fsyncs queued behind another
// test run) never loses a lease it holds.
const lockTTL = 5 * time.Second

func (c *cluster) nodeWith(name string, locks lock.Locker, skew time.Duration) (e *engine.Engine, run func() (stop func())) {
	c.t.Helper()
	e, err := engine.New(engine.Config{
		NodeID: name, LockTTL: lockTTL, RecoveryInterval: 50 * time.Millisecond, TimerInterval: 10 * time.Millisecond,
		Heartbeat: heartbeat.Config{Tick: 10 * time.Millisecond, Cycle: 200 * time.Millisecond},
		Now:       func() time.Time { return time.Now().Add(skew) },
	}, c.store, locks, memqueue.New(100), c.rt)
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

// saveAndStart saves a definition through e and starts an instance of it
// with no input.
func saveAndStart(t *testing.T, e *engine.Engine, source string) *weft.Instance {
	t.Helper()
	ctx := context.Background()
	d, _, err := e.SaveDefinition(ctx, []byte(source))
	if err != nil {
		t.Fatal(err)
	}
	inst, _, err := e.Start(ctx, d.Name, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	return inst
}

// waitStored polls the store until the instance satisfies ok, for up to
// 30 seconds, and returns it.
func (c *cluster) waitStored(id, what string, ok func(*weft.Instance) bool) *weft.Instance {
	c.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.store.GetInstance(context.Background(), id)
		if err != nil {
			c.t.Fatal(err)
		}
		if ok(got) {
			return got
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("instance %s: %s: not within 30s (%s)", id, what, got.Status)
		}
		time.Sleep(2 * time.Millisecond) // polling with a deadline
	}
}

func (c *cluster) waitFinished(e *engine.Engine, id string) *weft.Instance {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	inst, err := e.WaitFinished(ctx, id)
	if err != nil {
		c.t.Fatalf("instance %s: %v", id, err)
	}
	return inst
}

func TestPendingInstancesRunAfterRestart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	first, _ := c.node("first", local.New(local.Config{}))
	if _, _, err := first.SaveDefinition(ctx, []byte(`
name: quick
steps: [ { id: e, activity: kit.echo, input: 1, output: e } ]
output: "${ vars.e }"
`)); err != nil {
		t.Fatal(err)
	}
	// Started, but the node never runs: its in-process queue is lost.
	inst, _, err := first.Start(ctx, "quick", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	second, run := c.node("second", local.New(local.Config{}))
	run()
	if done := c.waitFinished(second, inst.ID); done.Status != weft.StatusCompleted || string(done.Output) != "1" {
		t.Fatalf("instance %s output %s", done.Status, done.Output)
	}
}

func TestDeadNodesInstanceIsTakenOver(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	a, runA := c.node("node-a", local.New(local.Config{}))
	if _, _, err := a.SaveDefinition(ctx, []byte(`
name: long
persistence: activity
steps:
  - { id: first, activity: kit.echo, input: 1 }
  - { id: work, activity: kit.work, input: { ms: 1500, beat_ms: 50 }, output: work }
output: "${ vars.work.done_ms }"
`)); err != nil {
		t.Fatal(err)
	}
	stopA := runA()
	inst, _, err := a.Start(ctx, "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// Node A persisted the first activity and is in the second: kill it.
	c.waitStored(inst.ID, "run by node A", func(in *weft.Instance) bool {
		return in.Status == weft.StatusRunning && in.Lease.Node == "node-a"
	})
	stopA()

	// Node B (its own locks, as another process's after A's died) finds the
	// expired lease and finishes the instance.
	b, runB := c.node("node-b", local.New(local.Config{}))
	runB()
	done := c.waitFinished(b, inst.ID)
	if done.Status != weft.StatusCompleted || string(done.Output) != "1500" {
		t.Fatalf("instance %s output %s error %+v", done.Status, done.Output, done.Error)
	}
	evs, err := c.store.History(ctx, inst.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	// A scheduled attempt 1 of "work" (persisted with the first step's
	// commit) and died; B abandoned it and ran attempt 2, with the same
	// idempotency key.
	var work []weft.HistoryEntry
	abandonedByB := false
	for _, e := range evs {
		if e.Type == "activity_scheduled" && e.StepPath == "steps[1]" {
			work = append(work, e)
		}
		if e.Type == "attempt_abandoned" && e.Node == "node-b" {
			abandonedByB = true
		}
	}
	if len(work) != 2 || work[0].Node != "node-a" || work[0].Attempt != 1 || work[1].Node != "node-b" || work[1].Attempt != 2 || !abandonedByB {
		t.Fatalf("history %v: want A's attempt 1 abandoned by B and B's attempt 2", types(evs))
	}
}

// Two live nodes sharing one lock service: leases are renewed while the
// instance runs, so the recovery sweeps never take it over, and the instance
// lock would refuse them anyway. The long activity runs once.
func TestLiveInstanceIsNeverRunTwice(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	locks := local.New(local.Config{})
	a, runA := c.node("node-a", locks)
	b, runB := c.node("node-b", locks)
	if _, _, err := a.SaveDefinition(ctx, []byte(`
name: longer
persistence: activity
steps:
  - { id: first, activity: kit.echo, input: 1 }
  - { id: work, activity: kit.work, input: { ms: 2500, beat_ms: 50 } }
`)); err != nil {
		t.Fatal(err)
	}
	runA()
	runB()
	inst, _, err := a.Start(ctx, "longer", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	done := c.waitFinished(b, inst.ID)
	if done.Status != weft.StatusCompleted {
		t.Fatalf("instance %s error %+v", done.Status, done.Error)
	}
	evs, err := c.store.History(ctx, inst.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(evs, "activity_scheduled"); n != 2 {
		t.Fatalf("%d activities scheduled, want 2 (no step run twice): %v", n, types(evs))
	}
}

// A timer that fell due while the host was down fires once after start.
func TestTimerDueDuringDowntimeFiresOnceAfterStart(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	before, runBefore := c.node("before", local.New(local.Config{}))
	if _, _, err := before.SaveDefinition(ctx, []byte(`
name: napper
steps:
  - { id: nap, delay: 1h }
  - { id: after, activity: kit.echo, input: woke, output: woke }
output: "${ vars.woke }"
`)); err != nil {
		t.Fatal(err)
	}
	stop := runBefore()
	inst, _, err := before.Start(ctx, "napper", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := before.Wait(ctx, inst.ID); err != nil || got.Status != weft.StatusSuspended {
		t.Fatalf("before the downtime: %v, %v; want suspended on its timer", got.Status, err)
	}
	stop()

	// The host comes back an hour and a minute later.
	after, runAfter := c.nodeAt("after", time.Hour+time.Minute)
	runAfter()
	done := c.waitFinished(after, inst.ID)
	if done.Status != weft.StatusCompleted || string(done.Output) != `"woke"` {
		t.Fatalf("instance %s output %s", done.Status, done.Output)
	}
	evs, err := c.store.History(ctx, inst.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(evs, "timer_fired"); n != 1 {
		t.Fatalf("timer fired %d times: %v", n, types(evs))
	}
}

// While an instance runs, the heartbeat scheduler keeps renewing its lease
// in the store, so that recovery never sees it expire.
func TestLeaseIsRenewedWhileRunning(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	e, run := c.node("renewer", local.New(local.Config{}))
	if _, _, err := e.SaveDefinition(ctx, []byte(`
name: lengthy
persistence: activity
steps:
  - { id: first, activity: kit.echo, input: 1 }
  - { id: work, activity: kit.work, input: { ms: 3000, beat_ms: 50 } }
`)); err != nil {
		t.Fatal(err)
	}
	run()
	inst, _, err := e.Start(ctx, "lengthy", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	var first time.Time
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := c.store.GetInstance(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() {
			t.Fatalf("instance %s before its lease was seen renewed (first expiry %s)", got.Status, first)
		}
		if got.Status == weft.StatusRunning && !got.Lease.Expiry.IsZero() {
			if first.IsZero() {
				first = got.Lease.Expiry
			} else if got.Lease.Expiry.After(first.Add(500 * time.Millisecond)) {
				break // renewed: the expiry moved past the first one
			}
			if expired, _ := c.store.ExpiredLeases(ctx, time.Now(), 10); len(expired) > 0 {
				t.Fatalf("lease of a running instance expired: %v", expired)
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("lease never renewed")
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
	c.waitFinished(e, inst.ID)
}

// A message written to an instance's inbox whose wake-up was lost (the node
// that wrote it died before queueing the instance) is found by the recovery
// sweep once it has waited a lease's TTL, and applied.
func TestLostWakeUpIsRecovered(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	e, run := c.node("n1", local.New(local.Config{}))
	run()
	inst := saveAndStart(t, e, `
name: waits
steps:
  - id: review
    wait: { event: approved, key: k1 }
    output: review
output: "${ vars.review.by }"
`)
	c.waitStored(inst.ID, "suspended", func(in *weft.Instance) bool { return in.Status == weft.StatusSuspended })
	bms, err := c.store.Bookmarks(ctx, inst.ID)
	if err != nil || len(bms) != 1 {
		t.Fatalf("bookmarks %+v, %v", bms, err)
	}
	// What Signal writes, without the push that would follow it.
	if _, err := c.store.Deliver(ctx, nil, []weft.Message{{InstanceID: inst.ID, ID: "stimulus:lost:" + bms[0].Token, Kind: "stimulus",
		Token: bms[0].Token, Payload: json.RawMessage(`{"by":"ada"}`)}}); err != nil {
		t.Fatal(err)
	}
	done := c.waitFinished(e, inst.ID)
	if done.Status != weft.StatusCompleted || string(done.Output) != `"ada"` {
		t.Fatalf("instance %s output %s; want the lost stimulus applied", done.Status, done.Output)
	}
	if ids, err := c.store.WaitingInboxes(ctx, time.Now().Add(time.Hour), 10); err != nil || len(ids) != 0 {
		t.Errorf("inboxes still waiting: %v, %v", ids, err)
	}
}

// An instance created but never queued (its node's queue was lost with the
// node) is run by a live node's recovery sweep once it has been pending for
// a lease's TTL.
func TestNeverQueuedInstanceIsRecovered(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	dead, _ := c.node("dead", local.New(local.Config{})) // never runs: its queue is never read
	live, run := c.node("live", local.New(local.Config{}))
	run()
	inst := saveAndStart(t, dead, `
name: quick
steps: [ { id: e, activity: kit.echo, input: 1, output: e } ]
output: "${ vars.e }"
`)
	done := c.waitFinished(live, inst.ID)
	if done.Status != weft.StatusCompleted || string(done.Output) != "1" {
		t.Fatalf("instance %s output %s", done.Status, done.Output)
	}
	evs, err := c.store.History(ctx, inst.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == "instance_started" && ev.Node != "live" {
			t.Errorf("started by %s, want the live node", ev.Node)
		}
	}
}

// The recovery sweep looks at the pending instances a page at a time and
// goes on where it stopped: a never-run instance behind a full page of
// older pending ones that live nodes run (lazy instances stay pending
// while they run; here their locks are held) is found, a few turns later.
func TestNeverRunInstanceBehindAFullPageIsRecovered(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	ctx := context.Background()
	locks := local.New(local.Config{})
	// Its clock runs ahead, so that every instance here is a lease's TTL
	// old to it at once.
	live, run := c.nodeWith("live", locks, 2*lockTTL)
	if _, _, err := live.SaveDefinition(ctx, []byte(quick)); err != nil {
		t.Fatal(err)
	}
	run()
	kit, err := c.store.CurrentPlugin(ctx, "kit")
	if err != nil {
		t.Fatal(err)
	}
	pins := map[string]string{"kit": kit.Version}
	const held = 1000 // the sweep's page
	errs := make(chan error, held)
	for i := range held {
		go func() {
			id := fmt.Sprintf("held-%04d", i)
			in := &weft.Instance{ID: id, Workflow: "quick", Version: 1, Status: weft.StatusPending, Input: json.RawMessage("1"), Plugins: pins}
			if _, err := c.store.Commit(ctx, store.Commit{Instance: in, At: time.Now().Add(-time.Minute)}); err != nil {
				errs <- err
				return
			}
			_, err := locks.Acquire(ctx, engine.InstanceLockKey(id), time.Hour)
			errs <- err
		}()
	}
	for range held {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	// Created by a node that died before running it, after the others.
	orphan := &weft.Instance{ID: "orphan", Workflow: "quick", Version: 1, Status: weft.StatusPending, Input: json.RawMessage("1"), Plugins: pins}
	if _, err := c.store.Commit(ctx, store.Commit{Instance: orphan}); err != nil {
		t.Fatal(err)
	}
	done := c.waitFinished(live, "orphan")
	if done.Status != weft.StatusCompleted || string(done.Output) != "1" {
		t.Fatalf("orphan %s output %s", done.Status, done.Output)
	}
}
