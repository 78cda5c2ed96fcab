package node_test

import (
	"context"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
)

// clusterNode opens a node of a cluster on the Redis servers addrs. Its
// lock TTL is short, for quick takeovers, and its heartbeat cycle a
// twelfth of it, so that a lock is renewed many times before it could
// expire even on a loaded machine (with the default 2s cycle a 2s lock
// expired between renewals, and another node ran the attempt again; with
// a 500ms cycle a 2s lock still lapsed on a machine loaded beside another
// `make test`).
func clusterNode(t *testing.T, id string, addrs ...string) *node.Node {
	t.Helper()
	n, _, _ := open(t, clusterConfig(t, id, addrs...))
	return n
}

// clusterConfig is the configuration of clusterNode.
func clusterConfig(t *testing.T, id string, addrs ...string) node.Config {
	return node.Config{
		NodeID: id, DataDir: t.TempDir(), Store: node.StoreRedis, RedisAddrs: addrs,
		Engine: engine.Config{TimerInterval: 10 * time.Millisecond, LockTTL: 6 * time.Second, Heartbeat: heartbeat.Config{Cycle: 500 * time.Millisecond}},
	}
}

// A plugin uploaded and a definition saved on one node are usable on the
// other at once; work started through either runs on both; a cancel sent
// to the node that does not run an activity stops it at once (the bus).
func TestTwoNodesShareOneRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := clusterNode(t, "a", srv.Addr())
	b := clusterNode(t, "b", srv.Addr())
	ctx := context.Background()
	if err := a.Ready(ctx); err != nil {
		t.Fatalf("Ready: %v", err)
	}
	if _, _, err := a.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(greet)); err != nil {
		t.Fatal(err)
	}
	// Started on b, with a definition and plugin a stored.
	nodes := map[string]bool{}
	for i := range 12 {
		e := []*node.Node{a, b}[i%2].Engine()
		inst, _, err := e.Start(ctx, "greet", json.RawMessage(`"hi"`), "")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		done, err := e.WaitFinished(wctx, inst.ID)
		cancel()
		if err != nil || done.Status != weft.StatusCompleted || string(done.Output) != `"HI"` {
			t.Fatalf("instance %s: %+v, %v", inst.ID, done, err)
		}
		hist, err := a.Store().History(ctx, inst.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range hist {
			if ev.Type == "activity_completed" {
				nodes[ev.Node] = true
			}
		}
	}
	t.Logf("activities ran on nodes %v", nodes)

	// A long activity, cancelled through the other node.
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(`
name: long
steps: [ { id: w, activity: kit.work, input: { ms: 60000, beat_ms: 10 }, timeout: 2m } ]
`)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := a.Engine().Start(ctx, "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	runner := waitFor(t, func() (string, bool) {
		hist, err := a.Store().History(ctx, inst.ID, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range hist {
			if ev.Type == "activity_scheduled" {
				return ev.Node, true
			}
		}
		return "", false
	})
	other := map[string]*node.Node{"a": b, "b": a}[runner]
	start := time.Now()
	if _, err := other.Engine().Cancel(ctx, inst.ID, weft.Operation{Reason: "test"}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done, err := other.Engine().WaitFinished(wctx, inst.ID)
	if err != nil || done.Status != weft.StatusCancelled {
		t.Fatalf("after cancel: %+v, %v", done, err)
	}
	// Without the bus the running node would notice only when the
	// 60-second activity ended.
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("the cancel took %s to stop an activity on the other node", took)
	}
	t.Logf("activity on %s cancelled through the other node in %s", runner, time.Since(start))
}

// waitFor polls f until it reports ok, for up to 30 seconds.
func waitFor[T any](t *testing.T, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if v, ok := f(); ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Two nodes racing on the same instances never both run one: while the
// instances run, extra ready-queue items for each are pushed for both
// nodes to pop; the node that pops one waits for the instance's Redis lock
// and finds nothing left to do. Each step runs once.
func TestTwoNodesNeverRunAnInstanceTwice(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	a := clusterNode(t, "a", srv.Addr())
	b := clusterNode(t, "b", srv.Addr())
	ctx := context.Background()
	if _, _, err := a.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(`
name: longer
persistence: activity
steps:
  - { id: first, activity: kit.echo, input: 1 }
  - { id: work, activity: kit.work, input: { ms: 600, beat_ms: 50 } }
`)); err != nil {
		t.Fatal(err)
	}
	q, err := redisqueue.New(redisqueue.Config{Client: srv.Client(t), Consumer: "racer"})
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	var ids []string
	for i := range 8 {
		inst, _, err := []*node.Node{a, b}[i%2].Engine().Start(ctx, "longer", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	// Push more work for every instance while they run (pushes for an
	// instance already queued coalesce; once popped, a new one is queued).
	for round := 0; round < 20; round++ {
		for _, id := range ids {
			if err := q.Push(ctx, queue.Item{InstanceID: id, Reason: "race"}); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(20 * time.Millisecond) // spread the pushes over the run
	}
	for _, id := range ids {
		wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		done, err := a.Engine().WaitFinished(wctx, id)
		cancel()
		if err != nil || done.Status != weft.StatusCompleted {
			t.Fatalf("instance %s: %+v, %v", id, done, err)
		}
		evs, err := a.Store().History(ctx, id, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		scheduled, completed := 0, 0
		for _, ev := range evs {
			switch ev.Type {
			case "activity_scheduled":
				scheduled++
			case "instance_completed":
				completed++
			}
		}
		if scheduled != 2 || completed != 1 {
			t.Errorf("instance %s: %d activities scheduled and %d completions; want 2 and 1\n%s", id, scheduled, completed, dump(evs))
		}
	}
}

// A node shutting down hands its running instances back: another node
// takes them over at its next recovery sweep, long before the lease's TTL
// (two minutes here) would have run out: within a minute even on a loaded
// machine.
func TestShutdownHandsInstancesBack(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	open := func(id string) (*node.Node, func()) {
		n, _, stop := open(t, node.Config{
			NodeID: id, DataDir: t.TempDir(), Store: node.StoreRedis, RedisAddrs: []string{srv.Addr()},
			Engine: engine.Config{TimerInterval: 10 * time.Millisecond, LockTTL: 2 * time.Minute, RecoveryInterval: 100 * time.Millisecond},
		})
		return n, stop
	}
	a, stopA := open("a")
	ctx := context.Background()
	if _, _, err := a.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(`
name: long
persistence: activity
steps:
  - { id: first, activity: kit.echo, input: 1 }
  - { id: work, activity: kit.work, input: { ms: 1500, beat_ms: 20 }, output: work }
`)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := a.Engine().Start(ctx, "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() (bool, bool) {
		got, err := a.Store().GetInstance(ctx, inst.ID)
		return true, err == nil && got.Status == weft.StatusRunning && got.Lease.Node == "a"
	})
	b, _ := open("b")
	start := time.Now()
	stopA()
	wctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	done, err := b.Engine().WaitFinished(wctx, inst.ID)
	if err != nil || done.Status != weft.StatusCompleted {
		t.Fatalf("after a's shutdown: %+v, %v", done, err)
	}
	if took := time.Since(start); took > time.Minute {
		t.Errorf("node b finished the instance %s after a's shutdown; the two-minute lease was not handed back", took)
	}
	t.Logf("node b finished the handed-back instance %s after a's shutdown", time.Since(start))
}

// A node with more workers than go-redis's default pool (ten connections
// per CPU) still runs instances once it has idled. Each idle worker holds
// a connection in a blocking read of the ready queue; with the default
// pool they held them all, and every lock call, whose deadline is a
// twentieth of the lock's TTL, timed out waiting for one: the node ran
// nothing more, and its recovery sweep stopped too (the chaos harness
// found it, docs/reliability.md).
func TestManyWorkersDoNotStarveTheRedisPool(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	cfg := clusterConfig(t, "a", srv.Addr())
	// The TTL of the bug: a lock call's deadline is a twentieth of it, and
	// a longer one could outlast a worker's blocking read.
	cfg.Engine.LockTTL = 2 * time.Second
	cfg.Engine.Workers = 10*runtime.GOMAXPROCS(0) + 8
	n, _, _ := open(t, cfg)
	ctx := context.Background()
	if _, _, err := n.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := n.Engine().SaveDefinition(ctx, []byte(greet)); err != nil {
		t.Fatal(err)
	}
	// Every worker is in a blocking read once the queue stayed empty for
	// a read's window (at most a second).
	time.Sleep(1500 * time.Millisecond) // idling is the condition under test
	for i := range 3 {
		inst, _, err := n.Engine().Start(ctx, "greet", json.RawMessage(`"hi"`), "")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		done, err := n.Engine().WaitFinished(wctx, inst.ID)
		cancel()
		if err != nil || done.Status != weft.StatusCompleted {
			t.Fatalf("instance %d (%s) on a node with %d workers: %+v, %v", i, inst.ID, cfg.Engine.Workers, done, err)
		}
	}
}
