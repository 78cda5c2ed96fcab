package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/batch"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/store"
)

// Batch jobs (docs/operations.md, "Batch operations"): one operation over
// many instances, each applied exactly once.

// batchHost is an engine whose batches sweep steps often, in small chunks.
func batchHost(t *testing.T, opts ...hostOption) *host {
	t.Helper()
	cfg := engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, BatchInterval: 10 * time.Millisecond, BatchChunk: 4}
	return newHost(t, append([]hostOption{withConfig(cfg)}, opts...)...)
}

// startBatch starts a batch from a document given as a Go value.
func (h *host) startBatch(doc map[string]any) *weft.Batch {
	h.t.Helper()
	raw, err := json.Marshal(doc)
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := h.e.StartBatch(context.Background(), raw, "alice")
	if err != nil {
		h.t.Fatalf("StartBatch(%s): %v", raw, err)
	}
	return b
}

// batchPhase reads a batch's phase.
func batchPhase(t *testing.T, b *weft.Batch) batch.Phase {
	t.Helper()
	st, err := batch.ParseState(b.State)
	if err != nil {
		t.Fatal(err)
	}
	return st.Phase
}

// waitBatch waits until a batch reaches phase, and returns it.
func (h *host) waitBatch(id string, phase batch.Phase) *weft.Batch {
	h.t.Helper()
	var b *weft.Batch
	pollUntil(h.t.(*testing.T), "batch "+id+" "+string(phase), func() bool {
		var err error
		if b, err = h.e.GetBatch(context.Background(), id); err != nil {
			h.t.Fatal(err)
		}
		return batchPhase(h.t.(*testing.T), b) == phase
	})
	return b
}

// startWaiting starts n approval instances, each waiting for its event,
// and returns their ids.
func (h *host) startWaiting(n int, prefix string) []string {
	h.t.Helper()
	ids := make([]string, n)
	for i := range ids {
		inst, _, err := h.e.Start(context.Background(), "approval", json.RawMessage(fmt.Sprintf(`{"id": "%s%d"}`, prefix, i)), "")
		if err != nil {
			h.t.Fatal(err)
		}
		ids[i] = inst.ID
	}
	for _, id := range ids {
		h.waitStatus(id, weft.StatusSuspended)
	}
	return ids
}

// batchEntries counts the history entries of type typ that name batch.
func batchEntries(t *testing.T, h *host, id string, typ weft.HistoryType, batchID string) int {
	t.Helper()
	n := 0
	for _, e := range h.history(id) {
		if e.Type == typ && entryData(t, e)["batch"] == batchID {
			n++
		}
	}
	return n
}

// TestBatchCancelByQuery: a cancel over a query cancels every unfinished
// instance it matches, once, and skips the finished ones, saying why.
func TestBatchCancelByQuery(t *testing.T) {
	t.Parallel()
	h := batchHost(t)
	h.save(approvalFlow)
	ctx := context.Background()
	ids := h.startWaiting(10, "c")
	for i := range 3 {
		if _, err := h.e.Signal(ctx, weft.Event{ID: fmt.Sprint("s", i), Name: "order.approved", Key: fmt.Sprint("c", i), Payload: map[string]any{"by": "ada"}}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus(ids[i], weft.StatusCompleted)
	}
	b := h.startBatch(map[string]any{"op": "cancel", "query": `workflow = "approval"`, "reason": "withdrawn", "rate": 0})
	b = h.waitBatch(b.ID, batch.PhaseDone)
	if b.Counts[weft.BatchDone] != 7 || b.Counts[weft.BatchSkipped] != 3 || b.Counts.Total() != 10 {
		t.Fatalf("counts %v, want 7 done and 3 skipped", b.Counts)
	}
	skipped, err := h.e.BatchItems(ctx, b.ID, weft.BatchItemFilter{Outcome: weft.BatchSkipped})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range skipped {
		if it.Reason != "finished (completed)" {
			t.Errorf("item %s skipped for %q, want finished (completed)", it.InstanceID, it.Reason)
		}
	}
	for _, id := range ids[3:] {
		got := h.waitStatus(id, weft.StatusCancelled)
		if got.Error == nil || got.Error.Message != "withdrawn" {
			t.Errorf("instance %s: error %+v, want the batch's reason", id, got.Error)
		}
		e := onlyEntry(t, h, id, weft.HistoryInstanceCancelled)
		if d := entryData(t, e); e.Actor != "alice" || d["batch"] != b.ID {
			t.Errorf("instance %s: instance_cancelled by %q data %s, want alice and the batch", id, e.Actor, e.Data)
		}
	}
}

// TestBatchPauseSignalResume: a batch pauses instances waiting for an
// event; a batch signal sends them the event, which they hold; a batch
// resume lets them complete. Each entry names its batch.
func TestBatchPauseSignalResume(t *testing.T) {
	t.Parallel()
	h := batchHost(t)
	h.save(approvalFlow)
	ids := h.startWaiting(6, "p")
	pause := h.startBatch(map[string]any{"op": "pause", "ids": ids, "reason": "incident"})
	h.waitBatch(pause.ID, batch.PhaseDone)
	for _, id := range ids {
		pollUntil(t, id+" paused", func() bool { return h.status(id) == weft.StatusPaused })
	}
	signal := h.startBatch(map[string]any{"op": "signal", "ids": ids, "args": map[string]any{"event": "order.approved", "payload": map[string]any{"by": "batch"}}})
	if b := h.waitBatch(signal.ID, batch.PhaseDone); b.Counts[weft.BatchDone] != 6 {
		t.Fatalf("signal counts %v, want 6 done", b.Counts)
	}
	for _, id := range ids {
		pollUntil(t, id+" holds the event", func() bool { return count(h.history(id), weft.HistoryEventHeld) == 1 })
	}
	// Paused already: a second pause skips them all.
	again := h.startBatch(map[string]any{"op": "pause", "ids": ids})
	if b := h.waitBatch(again.ID, batch.PhaseDone); b.Counts[weft.BatchSkipped] != 6 {
		t.Fatalf("second pause counts %v, want 6 skipped", b.Counts)
	}
	resume := h.startBatch(map[string]any{"op": "resume", "ids": ids})
	h.waitBatch(resume.ID, batch.PhaseDone)
	for _, id := range ids {
		done := h.waitStatus(id, weft.StatusCompleted)
		if string(done.Output) != `"batch"` {
			t.Errorf("instance %s output %s, want the batch's payload", id, done.Output)
		}
		for typ, b := range map[weft.HistoryType]string{weft.HistoryInstancePaused: pause.ID, weft.HistoryBookmarkResumed: signal.ID, weft.HistoryInstanceResumed: resume.ID} {
			if n := batchEntries(t, h, id, typ, b); n != 1 {
				t.Errorf("instance %s: %d %s entries of batch %s, want 1", id, n, typ, b)
			}
		}
	}
}

// TestBatchHoldThenConfirm: a batch that holds stops once selected, with
// its count, applies nothing until confirmed, then applies.
func TestBatchHoldThenConfirm(t *testing.T) {
	t.Parallel()
	h := batchHost(t)
	h.save(approvalFlow)
	ids := h.startWaiting(5, "h")
	b := h.startBatch(map[string]any{"op": "cancel", "query": `status = "suspended"`, "hold": true})
	b = h.waitBatch(b.ID, batch.PhaseSelected)
	st, err := batch.ParseState(b.State)
	if err != nil {
		t.Fatal(err)
	}
	if st.Matched != 5 || b.Counts[weft.BatchPending] != 5 {
		t.Fatalf("held batch: matched %d, counts %v; want 5 pending", st.Matched, b.Counts)
	}
	for _, id := range ids {
		if s := h.status(id); s != weft.StatusSuspended {
			t.Fatalf("instance %s is %s before the confirmation", id, s)
		}
	}
	if _, err := h.e.ConfirmBatch(context.Background(), b.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	h.waitBatch(b.ID, batch.PhaseDone)
	for _, id := range ids {
		h.waitStatus(id, weft.StatusCancelled)
	}
	if _, err := h.e.ConfirmBatch(context.Background(), b.ID, "bob"); !errors.Is(err, weft.ErrInvalid) {
		t.Errorf("confirming a finished batch: %v, want ErrInvalid", err)
	}
}

// TestBatchCancelStopsIt: a cancelled batch applies nothing more; its
// pending items stay pending.
func TestBatchCancelStopsIt(t *testing.T) {
	t.Parallel()
	h := batchHost(t)
	h.save(approvalFlow)
	ids := h.startWaiting(5, "s")
	b := h.startBatch(map[string]any{"op": "cancel", "ids": ids, "rate": 0.5})
	pollUntil(t, "the first item applied", func() bool {
		got, err := h.e.GetBatch(context.Background(), b.ID)
		return err == nil && got.Counts[weft.BatchDone] == 1
	})
	if _, err := h.e.CancelBatch(context.Background(), b.ID, weft.Operation{Actor: "bob", Reason: "wrong query"}); err != nil {
		t.Fatal(err)
	}
	got := h.waitBatch(b.ID, batch.PhaseCancelled)
	if got.Counts[weft.BatchDone] != 1 || got.Counts[weft.BatchPending] != 4 {
		t.Fatalf("counts %v, want 1 done and 4 pending", got.Counts)
	}
	cancelled := 0
	for _, id := range ids {
		if h.status(id) == weft.StatusCancelled {
			cancelled++
		}
	}
	if cancelled > 1 {
		t.Errorf("%d instances cancelled, want at most the one item applied", cancelled)
	}
}

// crashingBatches is a store whose ApplyBatchItems fails once before its
// write (a stepper that died first) and once after it (a stepper that
// died before it heard back): the batch must go on from what is stored.
type crashingBatches struct {
	store.Store
	calls         atomic.Int32
	before, after int32
}

func (c *crashingBatches) ApplyBatchItems(ctx context.Context, b *weft.Batch, changes []weft.BatchChange) (*weft.Batch, error) {
	n := c.calls.Add(1)
	if n == c.before {
		return nil, errors.New("injected: the stepper died before its write")
	}
	got, err := c.Store.ApplyBatchItems(ctx, b, changes)
	if n == c.after && err == nil {
		return nil, errors.New("injected: the stepper died after its write")
	}
	return got, err
}

// TestBatchExactlyOnceAcrossStepperDeath: each item of a batch is applied
// once though its stepper dies before and after a chunk's write: each
// instance is paused once.
func TestBatchExactlyOnceAcrossStepperDeath(t *testing.T) {
	t.Parallel()
	crashing := &crashingBatches{after: 2, before: 4}
	h := batchHost(t, withStore(func(s store.Store) store.Store { crashing.Store = s; return crashing }))
	h.save(approvalFlow)
	ids := h.startWaiting(17, "x")
	b := h.startBatch(map[string]any{"op": "pause", "query": `workflow = "approval"`, "rate": 0})
	b = h.waitBatch(b.ID, batch.PhaseDone)
	if b.Counts[weft.BatchDone] != 17 || b.Counts.Total() != 17 {
		t.Fatalf("counts %v, want 17 done", b.Counts)
	}
	// Five chunks of four or fewer, and the one that died before its
	// write tried again; the one that died after it is not.
	if n := crashing.calls.Load(); n != 6 {
		t.Errorf("%d chunk writes, want 6 (5, and one tried again)", n)
	}
	for _, id := range ids {
		pollUntil(t, id+" paused", func() bool { return h.status(id) == weft.StatusPaused })
		if n := batchEntries(t, h, id, weft.HistoryInstancePaused, b.ID); n != 1 {
			t.Errorf("instance %s paused %d times, want once", id, n)
		}
		if n := count(h.history(id), weft.HistoryEventIgnored); n != 0 {
			t.Errorf("instance %s: %d ignored operations, want none: %v", id, n, types(h.history(id)))
		}
	}
}

// TestBatchMigrateDryRun: a dry run answers per instance whether it can
// move, and moves none.
func TestBatchMigrateDryRun(t *testing.T) {
	t.Parallel()
	h := batchHost(t)
	h.save(rollV1)
	failed := h.finish("roll", map[string]any{"n": 1, "wait": false})
	waiting, _, err := h.e.Start(context.Background(), "roll", json.RawMessage(`{"n": 2, "wait": true, "k": "w"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(waiting.ID, weft.StatusSuspended)
	h.save(rollV2)
	b := h.startBatch(map[string]any{"op": "migrate", "ids": []string{failed.ID, waiting.ID}, "dry_run": true})
	b = h.waitBatch(b.ID, batch.PhaseDone)
	if b.Counts[weft.BatchCan] != 1 || b.Counts[weft.BatchCannot] != 1 {
		t.Fatalf("counts %v, want one can and one cannot", b.Counts)
	}
	for _, id := range []string{failed.ID, waiting.ID} {
		got, err := h.store.GetInstance(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		if got.Version != 1 {
			t.Errorf("instance %s moved to version %d by a dry run", id, got.Version)
		}
	}
}
