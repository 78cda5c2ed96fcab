package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/batch"
	"github.com/weftworks/weft/internal/engine"
)

// TestWorkflowPauseHoldsStartsAndReleasesInOrder: a paused workflow's
// starts are created and held, pending, past the recovery sweeps; a held
// one can be cancelled; the resume releases the others, oldest first,
// and each completes, recording start_held and start_released.
func TestWorkflowPauseHoldsStartsAndReleasesInOrder(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		// No recovery sweep during the test: the release batch alone
		// queues the held starts (TestHeldStartReleasedByRecovery has the
		// sweep).
		cfg := engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, BatchInterval: 10 * time.Millisecond, RecoveryInterval: time.Hour}
		opts := []hostOption{withConfig(cfg)}
		if redis {
			opts = append(opts, withRedisStore())
		}
		h := newHost(t, opts...)
		h.save("name: quick\nsteps: [{id: a, activity: kit.echo, input: \"${ input.n }\", output: a}]\noutput: \"${ vars.a }\"")
		ctx := context.Background()
		if _, err := h.e.PauseWorkflow(ctx, "quick", weft.Operation{Actor: "alice", Reason: "bad release"}); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for i := range 12 {
			inst, _, err := h.e.Start(ctx, "quick", json.RawMessage(fmt.Sprint(`{"n": `, i, `}`)), "")
			if err != nil {
				t.Fatal(err)
			}
			if inst.Status != weft.StatusPending || inst.Hold == nil {
				t.Fatalf("start %d while paused: %s, hold %v; want pending and held", i, inst.Status, inst.Hold)
			}
			ids = append(ids, inst.ID)
		}
		deadline := time.Now().Add(time.Second)
		for time.Now().Before(deadline) {
			for _, id := range ids {
				if s := h.status(id); s != weft.StatusPending {
					t.Fatalf("instance %s is %s while its workflow is paused", id, s)
				}
			}
			time.Sleep(50 * time.Millisecond) // watching for a start that must not come, for a second
		}
		e := onlyEntry(t, h, ids[0], weft.HistoryStartHeld)
		if e.Actor != "alice" || entryData(t, e)["reason"] != "bad release" {
			t.Errorf("start_held: actor %q data %s, want alice's pause", e.Actor, e.Data)
		}
		// A held start can be cancelled.
		if _, err := h.e.Cancel(ctx, ids[11], weft.Operation{Actor: "bob", Reason: "not wanted"}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(ids[11], weft.StatusCancelled)

		_, b, err := h.e.ResumeWorkflow(ctx, "quick", weft.Operation{Actor: "alice", Reason: "fixed"}, 0)
		if err != nil {
			t.Fatal(err)
		}
		b = h.waitBatch(b.ID, batch.PhaseDone)
		items, err := h.e.BatchItems(ctx, b.ID, weft.BatchItemFilter{Limit: 100})
		if err != nil {
			t.Fatal(err)
		}
		if len(items) != 11 {
			t.Fatalf("release items %v, want the 11 held", items)
		}
		for i, it := range items {
			if it.InstanceID != ids[i] {
				t.Fatalf("release item %d is %s, want %s: oldest first", i, it.InstanceID, ids[i])
			}
			if it.Outcome != weft.BatchDone {
				t.Errorf("release item %s: %s %q, want done", it.InstanceID, it.Outcome, it.Reason)
			}
		}
		for i, id := range ids[:11] {
			done := h.waitStatus(id, weft.StatusCompleted)
			if string(done.Output) != fmt.Sprint(i) || done.Hold != nil {
				t.Errorf("instance %s: output %s hold %v", id, done.Output, done.Hold)
			}
			onlyEntry(t, h, id, weft.HistoryStartReleased)
		}
		if _, _, err := h.e.ResumeWorkflow(ctx, "quick", weft.Operation{}, 0); !errors.Is(err, weft.ErrNotFound) {
			t.Errorf("resuming a workflow that is not paused: %v, want ErrNotFound", err)
		}
	})
}

// TestHeldStartReleasedByRecovery: the recovery sweep leaves a held start
// alone while its workflow is paused, and queues it once it is not (a
// start that read "paused" and committed after the release's selection),
// whereupon it releases itself and runs.
func TestHeldStartReleasedByRecovery(t *testing.T) {
	t.Parallel()
	cfg := engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, RecoveryInterval: 10 * time.Millisecond, LockTTL: time.Second}
	h := newHost(t, withConfig(cfg))
	h.save("name: quick\nsteps: [{id: a, activity: kit.echo, input: 1}]")
	ctx := context.Background()
	if _, err := h.e.PauseWorkflow(ctx, "quick", weft.Operation{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	inst, _, err := h.e.Start(ctx, "quick", nil, "")
	if err != nil {
		t.Fatal(err)
	}
	// Past a lease's TTL the sweep considers it, many times over.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if s := h.status(inst.ID); s != weft.StatusPending {
			t.Fatalf("instance %s is %s while its workflow is paused", inst.ID, s)
		}
		time.Sleep(50 * time.Millisecond) // watching for a start that must not come
	}
	// Unpaused without a release batch: the sweep is the safety net.
	if _, err := h.store.UnpauseWorkflow(ctx, "quick"); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(inst.ID, weft.StatusCompleted)
	onlyEntry(t, h, inst.ID, weft.HistoryStartReleased)
}

// TestReleaseBatchKeepsItsRate: starts held longer than a lease's TTL are
// left to the release batch while it runs: the recovery sweep, which
// queues a held start its release went past, does not release them ahead
// of it, so each is released by the batch, at its rate, oldest first.
func TestReleaseBatchKeepsItsRate(t *testing.T) {
	t.Parallel()
	cfg := engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, BatchInterval: 10 * time.Millisecond,
		RecoveryInterval: 10 * time.Millisecond, LockTTL: time.Second}
	h := newHost(t, withConfig(cfg))
	h.save("name: quick\nsteps: [{id: a, activity: kit.echo, input: 1}]")
	ctx := context.Background()
	if _, err := h.e.PauseWorkflow(ctx, "quick", weft.Operation{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for range 4 {
		inst, _, err := h.e.Start(ctx, "quick", nil, "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	// Older than a lease's TTL: the sweep would queue them, were they
	// not the batch's.
	deadline := time.Now().Add(1500 * time.Millisecond)
	for time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond) // letting them age past the sweep's cutoff
	}
	_, b, err := h.e.ResumeWorkflow(ctx, "quick", weft.Operation{Actor: "alice"}, 1)
	if err != nil {
		t.Fatal(err)
	}
	b = h.waitBatch(b.ID, batch.PhaseDone)
	items, err := h.e.BatchItems(ctx, b.ID, weft.BatchItemFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for i, it := range items {
		if it.InstanceID != ids[i] || it.Outcome != weft.BatchDone {
			t.Errorf("release item %d: %s %s %q, want %s done", i, it.InstanceID, it.Outcome, it.Reason, ids[i])
		}
	}
	for _, id := range ids {
		h.waitStatus(id, weft.StatusCompleted)
	}
}

// TestResumeRefusedLeavesTheWorkflowPaused: a resume whose release batch
// cannot be started (a rate no batch takes) fails, and the workflow stays
// paused: the release is created before the pause is lifted.
func TestResumeRefusedLeavesTheWorkflowPaused(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ctx := context.Background()
	if _, err := h.e.PauseWorkflow(ctx, "quick", weft.Operation{Actor: "alice"}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := h.e.ResumeWorkflow(ctx, "quick", weft.Operation{Actor: "alice"}, -1); !errors.Is(err, weft.ErrInvalid) {
		t.Fatalf("ResumeWorkflow at rate -1: %v, want ErrInvalid", err)
	}
	if _, err := h.store.GetWorkflowPause(ctx, "quick"); err != nil {
		t.Fatalf("the workflow's pause after a refused resume: %v, want it still paused", err)
	}
}
