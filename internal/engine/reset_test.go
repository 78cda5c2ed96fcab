package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/plugins/call"
)

// Reset (docs/operations.md, "Reset"): an instance runs again from a
// top-level step, with the variables it had when that step began.

const resetFlow = `
name: again
steps:
  - id: one
    set: { a: 1 }
  - { id: x, activity: kit.echo, input: "${ vars.a }", output: xr }
  - id: two
    set: { a: 2 }
  - { id: y, activity: kit.echo, input: "${ vars.a }", output: yr, retry: { max_attempts: 1 } }
  - { id: never, activity: kit.echo, input: "${ vars.yr }" }
output: "${ [vars.xr, vars.yr] }"
`

// failingOn fails every call whose input is input while on is set.
type failingOn struct {
	inner engine.Plugins
	input string
	on    atomic.Bool
	calls atomic.Int32 // the calls with input
}

func (f *failingOn) Invoke(ctx context.Context, version string, c call.Call) ([]byte, error) {
	if string(c.Input) == f.input {
		f.calls.Add(1)
		if f.on.Load() {
			return nil, &call.GuestError{Code: "down", Message: "the service is down"}
		}
	}
	return f.inner.Invoke(ctx, version, c)
}

// TestResetFromEarlierStep: a failed instance reset to an earlier step
// runs it again with the variables it began with, and completes; a
// completed one reset runs again too; steps it cannot be reset to are
// refused, saying why.
func TestResetFromEarlierStep(t *testing.T) {
	t.Parallel()
	f := &failingOn{input: "1"}
	f.on.Store(true)
	h := newHost(t,
		withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, VarsLimit: 1 << 16}),
		withPluginsWrapped(func(p engine.Plugins) engine.Plugins { f.inner = p; return f }))
	h.save(resetFlow)
	ctx := context.Background()
	// x fails (its input is 1): the instance fails at x.
	failed := h.finish("again", nil)
	if failed.Status != weft.StatusFailed {
		t.Fatalf("first run: %s, want failed", failed.Status)
	}
	points, err := h.e.ResetPoints(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(points) != 2 || points[0].Step != "one" || points[1].Step != "x" || !points[1].Vars {
		t.Fatalf("reset points %+v, want one and x, x with its variables", points)
	}
	for step, want := range map[string]string{"never": "never began", "nope": "no top-level step"} {
		if err := h.e.Reset(ctx, failed.ID, step, weft.Operation{Actor: "alice"}); !errors.Is(err, weft.ErrNotResettable) || !strings.Contains(err.Error(), want) {
			t.Errorf("Reset to %s: %v, want ErrNotResettable saying %q", step, err, want)
		}
	}

	f.on.Store(false)
	op := weft.Operation{Actor: "alice", Reason: "the service is back"}
	if err := h.e.Reset(ctx, failed.ID, "x", op); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the reset instance completed", func() bool { return h.status(failed.ID) == weft.StatusCompleted })
	done, err := h.store.GetInstance(ctx, failed.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out []any
	if err := json.Unmarshal(done.Output, &out); err != nil || len(out) != 2 || out[0] != float64(1) || out[1] != float64(2) {
		t.Fatalf("output %s, want [1, 2]: x ran with a = 1 again", done.Output)
	}
	e := onlyEntry(t, h, failed.ID, weft.HistoryInstanceReset)
	wantOperation(t, e, op, time.Time{}, time.Now())
	if d := entryData(t, e); d["step"] != "x" || d["from_status"] != "failed" {
		t.Errorf("instance_reset data %s, want step x from failed", e.Data)
	}
	if n := f.calls.Load(); n != 2 {
		t.Errorf("x called %d times, want 2 (failed, then again after the reset)", n)
	}

	// A completed instance runs again from y, with a = 2.
	if err := h.e.Reset(ctx, failed.ID, "y", weft.Operation{Actor: "bob"}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the second reset completed", func() bool {
		evs := h.history(failed.ID)
		return count(evs, weft.HistoryInstanceReset) == 2 && count(evs, weft.HistoryInstanceCompleted) == 2
	})
	if n := f.calls.Load(); n != 2 {
		t.Errorf("x called %d times after a reset to y, want still 2", n)
	}
}

// TestResetRefusedWithoutRecordedVariables: a step whose variables were
// larger than the limit when it began cannot be reset to.
func TestResetRefusedWithoutRecordedVariables(t *testing.T) {
	t.Parallel()
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, VarsLimit: 64}))
	h.save(`
name: big
steps:
  - id: fill
    set: { big: "${ input.big }" }
  - { id: use, activity: kit.echo, input: "${ vars.big }" }
`)
	done := h.finish("big", map[string]any{"big": "a value well over the sixty-four bytes this host keeps of the variables"})
	err := h.e.Reset(context.Background(), done.ID, "use", weft.Operation{})
	if !errors.Is(err, weft.ErrNotResettable) || !strings.Contains(err.Error(), "history.vars_limit") {
		t.Fatalf("Reset: %v, want ErrNotResettable naming history.vars_limit", err)
	}
	if err := h.e.Reset(context.Background(), done.ID, "fill", weft.Operation{}); err != nil {
		t.Fatalf("Reset to the first step, which began with no variables: %v", err)
	}
}

// TestResetRebuildsVariablesFromChanges: each top-level step's record keeps
// the variables changed since the one before, and a reset rebuilds what a
// step began with from the chain of them.
func TestResetRebuildsVariablesFromChanges(t *testing.T) {
	t.Parallel()
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, VarsLimit: 1 << 16}))
	h.save(`
name: chain
steps:
  - { id: s1, set: { a: 1 } }
  - { id: s2, set: { b: 2 } }
  - { id: s3, set: { c: "${ vars.a + vars.b }", a: 10 } }
  - { id: w, wait: { event: go, key: k } }
output: "${ vars }"
`)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	inst, _, err := h.e.Start(ctx, "chain", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the instance waits", func() bool { return h.status(inst.ID) == weft.StatusSuspended })
	var changes []string
	for _, e := range h.history(inst.ID) {
		if e.Type == weft.HistoryStepStarted {
			d := entryData(t, e)
			if _, whole := d["vars"]; whole {
				t.Errorf("step_started %s: a whole copy %s, want only the changes", e.StepPath, e.Data)
			}
			if c, ok := d["vars_changed"]; ok {
				b, _ := json.Marshal(c) // decoded from JSON: it encodes
				changes = append(changes, e.StepPath+" "+string(b))
			}
		}
	}
	want := []string{`steps[1] {"a":1}`, `steps[2] {"b":2}`, `steps[3] {"a":10,"c":3}`}
	if strings.Join(changes, "; ") != strings.Join(want, "; ") {
		t.Fatalf("changes recorded %q, want %q", changes, want)
	}
	// s3 began with a = 1 and b = 2, rebuilt from two records of changes:
	// it computes c = 3 again (with a missing it would fail).
	if err := h.e.Reset(ctx, inst.ID, "s3", weft.Operation{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	pollUntil(t, "the reset instance waits again", func() bool {
		return count(h.history(inst.ID), weft.HistoryInstanceReset) == 1 && h.status(inst.ID) == weft.StatusSuspended
	})
	if _, err := h.e.Signal(ctx, weft.Event{ID: "go-1", Name: "go", Key: "k"}); err != nil {
		t.Fatal(err)
	}
	done, err := h.e.WaitFinished(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(done.Output, &out); err != nil || out["a"] != 10.0 || out["b"] != 2.0 || out["c"] != 3.0 || len(out) != 3 {
		t.Errorf("output %s (%v), want a 10, b 2, c 3", done.Output, err)
	}
}
