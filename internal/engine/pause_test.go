package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/plugins/call"
)

// Pause and resume (docs/operations.md, "Pause and resume"): a paused
// instance begins no step; the timers and events that come meanwhile are
// held and applied on resume, in the order they came.

// pauseFlow waits for a minute and for an event at once, then calls an
// activity.
const pauseFlow = `
name: pausable
steps:
  - id: both
    parallel:
      - steps: [ { id: nap, delay: 1m } ]
      - steps: [ { id: go, wait: { event: go, key: "${ input.k }", timeout: 1h }, output: go } ]
  - { id: after, activity: kit.echo, input: "${ vars.go.n }", output: n }
output: "${ vars.n }"
`

// pollUntil polls cond until it holds, failing the test after a deadline.
func pollUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
}

// status reads an instance's status from the store.
func (h *host) status(id string) weft.Status {
	h.t.Helper()
	inst, err := h.store.GetInstance(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return inst.Status
}

// TestPauseResumeAcrossTimerAndEvent: a paused instance holds the fire of
// its delay's timer and a stimulus for its wait, and applies both, in
// order, when it is resumed; it then completes. On both stores.
func TestPauseResumeAcrossTimerAndEvent(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		clock := &fakeClock{now: t0}
		opts := []hostOption{withConfig(engine.Config{NodeID: "n1", TimerInterval: 5 * time.Millisecond, Now: clock.Now})}
		if redis {
			opts = append(opts, withRedisStore())
		}
		h := newHost(t, opts...)
		h.save(pauseFlow)
		ctx := context.Background()
		inst, _, err := h.e.Start(ctx, "pausable", json.RawMessage(`{"k": "p1"}`), "")
		if err != nil {
			t.Fatal(err)
		}
		h.waitStatus(inst.ID, weft.StatusSuspended)

		// A resume of an instance that is not paused is refused.
		if _, err := h.e.Resume(ctx, inst.ID, weft.Operation{Actor: "alice"}); !errors.Is(err, weft.ErrNotPaused) {
			t.Fatalf("Resume of a suspended instance: %v, want ErrNotPaused", err)
		}
		paused := weft.Operation{Actor: "alice", Reason: "bad rollout", Batch: "b-1"}
		if _, err := h.e.Pause(ctx, inst.ID, paused); err != nil {
			t.Fatal(err)
		}
		pollUntil(t, "the instance paused", func() bool { return h.status(inst.ID) == weft.StatusPaused })
		got, err := h.store.GetInstance(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if p, held, err := h.e.Paused(got); err != nil || p == nil || p.Op.Actor != "alice" || p.Op.Reason != "bad rollout" || held != 0 {
			t.Fatalf("Paused: %+v, %d, %v; want alice's pause, nothing held", p, held, err)
		}
		// A second pause writes nothing: the first one's actor stays.
		if _, err := h.e.Pause(ctx, inst.ID, weft.Operation{Actor: "bob"}); err != nil {
			t.Fatal(err)
		}

		// The delay comes due, and the event comes: both are held.
		clock.set(t0.Add(2 * time.Minute))
		pollUntil(t, "the delay's fire held", func() bool { return count(h.history(inst.ID), weft.HistoryEventHeld) == 1 })
		out, err := h.e.Signal(ctx, weft.Event{ID: "s1", Name: "go", Key: "p1", Payload: map[string]any{"n": 7}})
		if err != nil || len(out.Resumed) != 1 {
			t.Fatalf("Signal: %+v, %v; want the paused instance's bookmark resumed", out, err)
		}
		pollUntil(t, "the stimulus held", func() bool { return count(h.history(inst.ID), weft.HistoryEventHeld) == 2 })
		if s := h.status(inst.ID); s != weft.StatusPaused {
			t.Fatalf("status %s after the held inputs, want paused", s)
		}
		evs := h.history(inst.ID)
		if n := count(evs, weft.HistoryStepCompleted); n != 0 {
			t.Fatalf("%d steps completed while paused, want none: %v", n, types(evs))
		}
		// The delay's timer left the store as it fired: it is in the
		// state now, not due again.
		timers, err := h.store.Timers(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		for _, tm := range timers {
			if !tm.Due.After(clock.Now()) {
				t.Errorf("timer %+v is still due while held", tm)
			}
		}

		resumed := weft.Operation{Actor: "carol", Reason: "fixed"}
		if _, err := h.e.Resume(ctx, inst.ID, resumed); err != nil {
			t.Fatal(err)
		}
		done := h.waitStatus(inst.ID, weft.StatusCompleted)
		if string(done.Output) != "7" {
			t.Errorf("output %s, want the held stimulus's 7", done.Output)
		}
		evs = h.history(inst.ID)
		wantOperation(t, onlyEntry(t, h, inst.ID, weft.HistoryInstancePaused), paused, time.Time{}, clock.Now())
		r := onlyEntry(t, h, inst.ID, weft.HistoryInstanceResumed)
		if d := entryData(t, r); r.Actor != "carol" || d["held"] != float64(2) {
			t.Errorf("instance_resumed: actor %q, data %s; want carol, held 2", r.Actor, r.Data)
		}
		// In order: paused, held, held, resumed, then the delay's fire and
		// the stimulus, as they came.
		want := []weft.HistoryType{weft.HistoryInstancePaused, weft.HistoryEventHeld, weft.HistoryEventHeld, weft.HistoryInstanceResumed, weft.HistoryTimerFired, weft.HistoryBookmarkResumed}
		var seen []weft.HistoryType
		for _, e := range evs {
			if i := len(seen); i < len(want) && e.Type == want[i] {
				seen = append(seen, e.Type)
			}
		}
		if len(seen) != len(want) {
			t.Errorf("history %v: want %v in that order", types(evs), want)
		}
		// A finished instance cannot be paused.
		if _, err := h.e.Pause(ctx, inst.ID, paused); !errors.Is(err, weft.ErrFinished) {
			t.Errorf("Pause of a completed instance: %v, want ErrFinished", err)
		}
	})
}

// gated blocks the calls of one activity input until released.
type gated struct {
	inner   engine.Plugins
	input   string
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (g *gated) Invoke(ctx context.Context, version string, c call.Call) ([]byte, error) {
	if string(c.Input) == g.input {
		g.once.Do(func() { close(g.started) })
		select {
		case <-g.release:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return g.inner.Invoke(ctx, version, c)
}

// TestPauseRunningInstanceStopsAtBoundary: an instance paused while an
// attempt runs lets the attempt complete (recorded), and begins no other
// step until resumed; it is running until the attempt ends, paused after.
func TestPauseRunningInstanceStopsAtBoundary(t *testing.T) {
	t.Parallel()
	g := &gated{input: `"first"`, started: make(chan struct{}), release: make(chan struct{})}
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { g.inner = p; return g }))
	h.save(`
name: two
steps:
  - { id: a, activity: kit.echo, input: first }
  - { id: b, activity: kit.echo, input: second, output: b }
output: "${ vars.b }"
`)
	ctx := context.Background()
	inst, _, err := h.e.Start(ctx, "two", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	<-g.started
	if _, err := h.e.Pause(ctx, inst.ID, weft.Operation{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the pause applied", func() bool { return count(h.history(inst.ID), weft.HistoryInstancePaused) == 1 })
	if s := h.status(inst.ID); s == weft.StatusPaused {
		t.Fatalf("status %s with an attempt in flight, want it running until the attempt ends", s)
	}
	close(g.release)
	pollUntil(t, "paused after the attempt", func() bool { return h.status(inst.ID) == weft.StatusPaused })
	evs := h.history(inst.ID)
	if n := count(evs, weft.HistoryActivityCompleted); n != 1 {
		t.Fatalf("%d attempts completed, want the one in flight: %v", n, types(evs))
	}
	if n := count(evs, weft.HistoryActivityScheduled); n != 1 {
		t.Fatalf("%d attempts scheduled, want b never begun: %v", n, types(evs))
	}
	if _, err := h.e.Resume(ctx, inst.ID, weft.Operation{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	done := h.waitStatus(inst.ID, weft.StatusCompleted)
	if string(done.Output) != `"second"` {
		t.Errorf("output %s, want b's", done.Output)
	}
}

// TestPauseThenResumeBeforeItRuns: a pause and a resume sent one after
// the other, before the instance applies either, both apply, in order.
func TestPauseThenResumeBeforeItRuns(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(approvalFlow)
	ctx := context.Background()
	inst, _, err := h.e.Start(ctx, "approval", json.RawMessage(`{"id": "q"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(inst.ID, weft.StatusSuspended)
	for i, op := range []string{"pause", "resume", "pause"} {
		var err error
		if op == "pause" {
			_, err = h.e.Pause(ctx, inst.ID, weft.Operation{Actor: fmt.Sprint("op", i)})
		} else {
			_, err = h.e.Resume(ctx, inst.ID, weft.Operation{Actor: fmt.Sprint("op", i)})
		}
		if err != nil {
			t.Fatalf("%s: %v", op, err)
		}
	}
	pollUntil(t, "paused", func() bool {
		evs := h.history(inst.ID)
		return count(evs, weft.HistoryInstancePaused) == 2 && count(evs, weft.HistoryInstanceResumed) == 1
	})
	if s := h.status(inst.ID); s != weft.StatusPaused {
		t.Fatalf("status %s, want paused", s)
	}
}
