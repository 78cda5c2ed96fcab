package engine_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/store"
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
	if _, _, err := e.SaveDefinition(ctx, []byte(`
name: long
persistence: activity
steps:
  - { id: work, activity: kit.work, input: { ms: 1500, beat_ms: 20 }, output: work }
output: "${ vars.work }"
`)); err != nil {
		t.Fatal(err)
	}
	inst, err := e.Start(ctx, "long", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// Arm the fault once the attempt runs (its instance is leased).
	c.waitStored(inst.ID, "running", func(in *store.Instance) bool { return in.Status == store.StatusRunning })
	locks.armed.Store(true)
	fin := c.waitFinished(e, inst.ID)
	var out struct{ Attempt int }
	if fin.Status != store.StatusCompleted || json.Unmarshal(fin.Output, &out) != nil {
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
	if _, _, err := e.SaveDefinition(ctx, []byte(`
name: late
steps:
  - { id: work, activity: kit.work, input: { ms: 1500, beat_ms: 20, stall_at_ms: 1 }, output: work }
output: "${ vars.work }"
`)); err != nil {
		t.Fatal(err)
	}
	inst, err := e.Start(ctx, "late", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	c.waitStored(inst.ID, "running", func(in *store.Instance) bool { return in.Status == store.StatusRunning })
	locks.armed.Store(true)
	fin := c.waitFinished(e, inst.ID)
	var out struct{ Attempt int }
	if fin.Status != store.StatusCompleted || json.Unmarshal(fin.Output, &out) != nil || out.Attempt != 2 {
		t.Fatalf("instance %s output %s error %+v; want attempt 2's result", fin.Status, fin.Output, fin.Error)
	}
	// The note reaches the history with the holder's next commit.
	var late *store.Event
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
