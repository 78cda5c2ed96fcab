package engine_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
)

// pushCounter is a ready queue that counts the pushes it is given, by
// reason.
type pushCounter struct {
	queue.Queue
	mu     sync.Mutex
	pushes map[string]int
}

func (q *pushCounter) Push(ctx context.Context, item queue.Item) error {
	q.mu.Lock()
	q.pushes[item.Reason]++
	q.mu.Unlock()
	return q.Queue.Push(ctx, item)
}

func (q *pushCounter) count(reason string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pushes[reason]
}

// eagerNode is an engine of cluster c with cfg, on a ready queue that
// counts pushes, run until the test ends.
func (c *cluster) eagerNode(cfg engine.Config, locks lock.Locker) (*engine.Engine, *pushCounter, func()) {
	c.t.Helper()
	q := &pushCounter{Queue: memqueue.New(100), pushes: map[string]int{}}
	if cfg.LockTTL == 0 {
		cfg.LockTTL = lockTTL
	}
	cfg.RecoveryInterval = 50 * time.Millisecond
	cfg.TimerInterval = 10 * time.Millisecond
	cfg.Heartbeat = heartbeat.Config{Tick: 10 * time.Millisecond, Cycle: 200 * time.Millisecond}
	e, err := engine.New(cfg, c.store, locks, q, c.rt)
	if err != nil {
		c.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	stop := func() { cancel(); <-done }
	c.t.Cleanup(stop)
	return e, q, stop
}

// warmUp starts quick instances on e until one runs eagerly: until then
// the workers may not all have started. It saves quick, and leaves q's
// counts at zero.
func (c *cluster) warmUp(e *engine.Engine, q *pushCounter) {
	c.t.Helper()
	if _, _, err := e.SaveDefinition(context.Background(), []byte(quick)); err != nil {
		c.t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		inst, _, err := e.Start(context.Background(), "quick", nil, "")
		if err != nil {
			c.t.Fatal(err)
		}
		c.waitFinished(e, inst.ID)
		q.mu.Lock()
		pushed := q.pushes["start"]
		q.pushes = map[string]int{}
		q.mu.Unlock()
		if pushed == 0 {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("no start ran eagerly within 30s")
		}
	}
}

const quick = `
name: quick
steps: [ { id: e, activity: kit.echo, input: 1, output: e } ]
output: "${ vars.e }"
`

// A start runs on an idle worker of the node that took it, without the
// ready queue; without EagerStarts, every start is pushed on it.
func TestEagerStartsBypassTheQueue(t *testing.T) {
	t.Parallel()
	for _, eager := range []bool{true, false} {
		c := newCluster(t)
		e, q, _ := c.eagerNode(engine.Config{NodeID: "n1", EagerStarts: eager}, local.New(local.Config{}))
		if _, _, err := e.SaveDefinition(context.Background(), []byte(quick)); err != nil {
			t.Fatal(err)
		}
		if eager {
			c.warmUp(e, q)
		}
		const n = 20
		for range n {
			inst, _, err := e.Start(context.Background(), "quick", nil, "")
			if err != nil {
				t.Fatal(err)
			}
			if done := c.waitFinished(e, inst.ID); done.Status != weft.StatusCompleted || string(done.Output) != "1" {
				t.Fatalf("eager %v: instance %s %s output %s", eager, inst.ID, done.Status, done.Output)
			}
		}
		want := 0
		if !eager {
			want = n
		}
		if got := q.count("start"); got != want {
			t.Errorf("eager %v: %d starts pushed on the queue, want %d", eager, got, want)
		}
	}
}

// A start that finds no idle worker goes through the queue: the only
// worker of this node takes turns popping it, and never waits for eager
// starts.
func TestEagerStartWithNoIdleWorkerIsQueued(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	e, q, _ := c.eagerNode(engine.Config{NodeID: "n1", EagerStarts: true, Workers: 1}, local.New(local.Config{}))
	if _, _, err := e.SaveDefinition(context.Background(), []byte(quick)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := e.Start(context.Background(), "quick", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if done := c.waitFinished(e, inst.ID); done.Status != weft.StatusCompleted {
		t.Fatalf("instance %s %s", inst.ID, done.Status)
	}
	if got := q.count("start"); got != 1 {
		t.Errorf("%d starts pushed on the queue, want 1", got)
	}
}

// acquireSignal is a Locker that closes acquired when a lock is first
// taken on an instance once it is armed.
type acquireSignal struct {
	lock.Locker
	armed    atomic.Bool
	once     sync.Once
	acquired chan struct{}
}

func (l *acquireSignal) Acquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, error) {
	lease, err := l.Locker.Acquire(ctx, key, ttl)
	if err == nil && l.armed.Load() && strings.HasPrefix(key, engine.InstanceLockKey("")) {
		l.once.Do(func() { close(l.acquired) })
	}
	return lease, err
}

// An eager start whose node dies while it runs, before anything of the
// run was stored (lazy persistence), was never on any queue: another
// node's recovery sweep finds it pending and runs it. (That node runs
// already, so it is its sweep, not its start-up, that finds it.)
//
// The node "dies" by stopping, and a stopping node hands an eager start
// its worker had not begun back to its queue (whoever runs next takes
// it): when the lock the test waits for was taken by node A's recovery
// sweep rather than by the worker, on a loaded machine, the case under
// test did not happen. The test then tries again on a new cluster, three
// times at most.
func TestEagerStartOfADeadNodeIsRecovered(t *testing.T) {
	t.Parallel()
	for try := 1; ; try++ {
		if eagerStartOfADeadNode(t) {
			return
		}
		if try == 3 {
			t.Fatal("in 3 tries, node A never began the eager start before it stopped (it put it on its queue each time)")
		}
		t.Logf("try %d: node A stopped before its worker began the eager start; again", try)
	}
}

// eagerStartOfADeadNode runs TestEagerStartOfADeadNodeIsRecovered's case
// on a new cluster; false when node A's worker had not begun the start
// when A stopped (or none was idle to take it).
func eagerStartOfADeadNode(t *testing.T) bool {
	c := newCluster(t)
	locks := &acquireSignal{Locker: local.New(local.Config{}), acquired: make(chan struct{})}
	b, qb, _ := c.eagerNode(engine.Config{NodeID: "node-b", EagerStarts: true}, local.New(local.Config{}))
	c.warmUp(b, qb)
	a, qa, stopA := c.eagerNode(engine.Config{NodeID: "node-a", EagerStarts: true}, locks)
	c.warmUp(a, qa)
	locks.armed.Store(true)
	if _, _, err := a.SaveDefinition(context.Background(), []byte(`
name: long
steps:
  - { id: work, activity: kit.work, input: { ms: 1500, beat_ms: 50 }, output: work }
output: "${ vars.work.done_ms }"
`)); err != nil {
		t.Fatal(err)
	}
	inst, _, err := a.Start(context.Background(), "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	if qa.count("start") != 0 {
		return false // no worker of A was idle: the start went on its queue
	}
	select {
	case <-locks.acquired:
	case <-time.After(30 * time.Second):
		t.Fatal("node A did not run the instance within 30s")
	}
	stopA()
	if qa.count("start") != 0 {
		return false
	}
	if got, err := c.store.GetInstance(context.Background(), inst.ID); err != nil || got.Status != weft.StatusPending {
		t.Fatalf("instance after node A died: %+v, %v; want it pending", got, err)
	}
	done := c.waitFinished(b, inst.ID)
	if done.Status != weft.StatusCompleted || string(done.Output) != "1500" {
		t.Fatalf("instance %s output %s error %+v", done.Status, done.Output, done.Error)
	}
	evs, err := c.store.History(context.Background(), inst.ID, 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs {
		if ev.Type == "instance_started" && ev.Node != "node-b" {
			t.Errorf("started by %s, want node-b", ev.Node)
		}
	}
	return true
}

// A start's errors say what is missing: the workflow (ErrNoSuchWorkflow),
// or a plugin it uses (weft.ErrNotFound, naming it, not ErrNoSuchWorkflow).
func TestStartSaysWhatIsMissing(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	e, _, _ := c.eagerNode(engine.Config{NodeID: "n1"}, local.New(local.Config{}))
	_, _, err := e.Start(context.Background(), "nope", nil, "")
	if !errors.Is(err, weft.ErrNoSuchWorkflow) || !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("no such workflow: %v", err)
	}
	if _, _, err := e.SaveDefinition(context.Background(), []byte(quick)); err != nil {
		t.Fatal(err)
	}
	if err := c.store.DeletePlugin(context.Background(), "kit"); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.Start(context.Background(), "quick", nil, "")
	if errors.Is(err, weft.ErrNoSuchWorkflow) || !errors.Is(err, weft.ErrNotFound) || !strings.Contains(err.Error(), "workflow quick uses plugin kit") {
		t.Errorf("a plugin not uploaded: %v", err)
	}
}
