package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
)

// losingLocker is the in-process locker with one injected fault: the first
// extension of an instance lock, once armed, reports the lease lost.
type losingLocker struct {
	lock.Locker
	armed atomic.Bool
	lost  atomic.Int32
}

func (l *losingLocker) Acquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, error) {
	le, err := l.Locker.Acquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return &losingLease{Lease: le, l: l}, nil
}

type losingLease struct {
	lock.Lease
	l *losingLocker
}

func (le *losingLease) Extend(ctx context.Context, ttl time.Duration) error {
	if le.l.armed.Load() && le.l.lost.Add(1) == 1 {
		return lock.ErrLost
	}
	return le.Lease.Extend(ctx, ttl)
}

// The heartbeat scheduler extends the locks of running instances; one it
// finds lost stops the execution at once — its guest is cancelled and it
// writes nothing more — and the instance is taken over by recovery after
// its lease expires, as attempt 2.
func TestLostLockStopsTheExecution(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	locks := &losingLocker{Locker: local.New(local.Config{})}
	e, run := c.node("n1", locks)
	run()
	ctx := context.Background()
	inst := saveAndStart(t, e, `
name: long
persistence: activity
steps:
  - { id: work, activity: kit.work, input: { ms: 1500, beat_ms: 20 }, output: work }
output: "${ vars.work }"
`)
	// Arm the fault once the attempt runs (its instance is leased).
	c.waitStored(inst.ID, "running", func(in *weft.Instance) bool { return in.Status == weft.StatusRunning })
	locks.armed.Store(true)
	fin := c.waitFinished(e, inst.ID)
	var out struct{ Attempt int }
	if fin.Status != weft.StatusCompleted || json.Unmarshal(fin.Output, &out) != nil {
		t.Fatalf("instance %s output %s error %+v", fin.Status, fin.Output, fin.Error)
	}
	if locks.lost.Load() == 0 {
		t.Fatal("the scheduler never extended the instance lock")
	}
	if out.Attempt != 2 {
		t.Errorf("completed by attempt %d; want 2: the execution that lost its lock must not complete attempt 1", out.Attempt)
	}
	evs, err := c.store.History(ctx, inst.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if count(evs, "attempt_abandoned") != 1 || count(evs, "activity_completed") != 1 {
		t.Errorf("history has %d abandoned attempts and %d completions; want 1 and 1", count(evs, "attempt_abandoned"), count(evs, "activity_completed"))
	}
}

// An attempt that completes after its execution lost the instance (its
// guest stalled and never saw the cancellation) is refused, never applied,
// and recorded: the holder's history shows a late_completion_refused for
// attempt 1, and the instance's result is attempt 2's.
func TestLateCompletionIsRefusedAndRecorded(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	locks := &losingLocker{Locker: local.New(local.Config{})}
	e, run := c.node("n1", locks)
	run()
	ctx := context.Background()
	inst := saveAndStart(t, e, `
name: late
steps:
  - { id: work, activity: kit.work, input: { ms: 1500, beat_ms: 20, stall_at_ms: 1 }, output: work }
output: "${ vars.work }"
`)
	c.waitStored(inst.ID, "running", func(in *weft.Instance) bool { return in.Status == weft.StatusRunning })
	locks.armed.Store(true)
	fin := c.waitFinished(e, inst.ID)
	var out struct{ Attempt int }
	if fin.Status != weft.StatusCompleted || json.Unmarshal(fin.Output, &out) != nil || out.Attempt != 2 {
		t.Fatalf("instance %s output %s error %+v; want attempt 2's result", fin.Status, fin.Output, fin.Error)
	}
	// The note reaches the history with the holder's next commit.
	var late *weft.HistoryEntry
	deadline := time.Now().Add(30 * time.Second)
	for late == nil {
		evs, err := c.store.History(ctx, inst.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		for i, ev := range evs {
			if ev.Type == "late_completion_refused" {
				late = &evs[i]
			}
		}
		if late == nil {
			if time.Now().After(deadline) {
				t.Fatalf("no late_completion_refused in the history: %+v", evs)
			}
			time.Sleep(5 * time.Millisecond) // polling with a deadline
		}
	}
	if late.Attempt != 1 || late.Node != "n1" || late.StepPath == "" {
		t.Errorf("late completion event %+v; want attempt 1 of the step, from n1", late)
	}
}

// stallingStore and stallingLocker make the backends unreachable for
// renewals while stalled is set: the one fault of the next test.
type stallingStore struct {
	store.Store
	stalled *atomic.Bool
}

func (s stallingStore) RenewLeases(ctx context.Context, r store.LeaseRenewal) ([]string, error) {
	if s.stalled.Load() {
		return nil, errors.New("store unreachable")
	}
	return s.Store.RenewLeases(ctx, r)
}

type stallingLocker struct {
	lock.Locker
	stalled *atomic.Bool
}

func (l stallingLocker) Acquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, error) {
	le, err := l.Locker.Acquire(ctx, key, ttl)
	if err != nil {
		return nil, err
	}
	return stallingLease{Lease: le, stalled: l.stalled}, nil
}

type stallingLease struct {
	lock.Lease
	stalled *atomic.Bool
}

func (le stallingLease) Extend(ctx context.Context, ttl time.Duration) error {
	if le.stalled.Load() {
		return lock.Transient(errors.New("lock backend unreachable"))
	}
	return le.Lease.Extend(ctx, ttl)
}

// When renewals cannot reach the backends for longer than the lock's TTL,
// the execution stops once its lock is over by its own clock, and the
// execution that recovery starts on the same node afterwards is kept alive
// on its own: the instance completes with attempt 2, abandoned only once.
// (Before the scheduler's items were named per execution, the first
// execution's items kept renewing the second's lock, the first never
// stopped, and the second lost its lease when the first ended.)
func TestStalledRenewalsStopTheExecutionAndSpareItsSuccessor(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	stalled := &atomic.Bool{}
	e, err := engine.New(engine.Config{
		// The lock must lapse while the work runs (6 s), and not before
		// the stall: a renewal late by 2 s on a loaded machine is rare.
		NodeID: "a", LockTTL: 2 * time.Second, RecoveryInterval: 50 * time.Millisecond, TimerInterval: 10 * time.Millisecond,
		Heartbeat: heartbeat.Config{Tick: 10 * time.Millisecond, Cycle: 200 * time.Millisecond},
		Logger:    slog.New(slog.DiscardHandler),
	}, stallingStore{Store: c.store, stalled: stalled}, stallingLocker{Locker: local.New(local.Config{}), stalled: stalled}, memqueue.New(100), c.rt)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = e.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	inst := saveAndStart(t, e, `
name: long
steps:
  - { id: work, activity: kit.work, input: { ms: 6000, beat_ms: 20 }, output: work }
output: "${ vars.work }"
`)
	c.waitStored(inst.ID, "running", func(in *weft.Instance) bool { return in.Status == weft.StatusRunning })
	stalled.Store(true)
	// Until recovery on this node has taken the instance over.
	c.waitStored(inst.ID, "taken over", func(*weft.Instance) bool {
		evs, err := c.store.History(ctx, inst.ID, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		return count(evs, "attempt_abandoned") > 0
	})
	stalled.Store(false)
	fin := c.waitFinished(e, inst.ID)
	var out struct{ Attempt int }
	if fin.Status != weft.StatusCompleted || json.Unmarshal(fin.Output, &out) != nil {
		t.Fatalf("instance %s output %s error %+v", fin.Status, fin.Output, fin.Error)
	}
	evs, err := c.store.History(ctx, inst.ID, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	if out.Attempt != 2 || count(evs, "attempt_abandoned") != 1 {
		t.Errorf("completed by attempt %d after %d abandoned attempts; want attempt 2 after 1: %v", out.Attempt, count(evs, "attempt_abandoned"), types(evs))
	}
}
