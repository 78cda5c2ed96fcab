package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
)

func TestExportImportRoundTrip(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(approvalFlow)
	ctx := context.Background()
	inst, _, err := h.e.Start(ctx, "approval", json.RawMessage(`{"id": "x-1"}`), "")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(inst.ID, weft.StatusSuspended)

	exported, err := h.e.Export(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON, as over HTTP.
	b, err := json.Marshal(exported)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.e.Delete(ctx, inst.ID, weft.Operation{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.GetInstance(ctx, inst.ID); !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("after Delete: %v, want ErrNotFound", err)
	}
	var back weft.Snapshot
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Bookmarks) != 1 || len(back.Timers) != 1 || len(back.Runner) == 0 {
		t.Fatalf("exported state %s: want its bookmark, timeout timer and runner state", b)
	}
	imported, _, err := h.e.Import(ctx, &back, engine.ImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if imported.ID != inst.ID || imported.Status != weft.StatusSuspended {
		t.Fatalf("imported %s %s", imported.ID, imported.Status)
	}
	// It carries on where it was: waiting for its approval.
	if _, err := h.e.Signal(ctx, weft.Event{Name: "order.approved", Key: "x-1", Payload: map[string]any{"by": "imported"}}); err != nil {
		t.Fatal(err)
	}
	done := h.waitStatus(inst.ID, weft.StatusCompleted)
	if string(done.Output) != `"imported"` {
		t.Fatalf("output %s", done.Output)
	}
}

func TestImportRefusesUnknownFormat(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	if _, _, err := h.e.Import(context.Background(), &weft.Snapshot{Format: 99}, engine.ImportOptions{}); err == nil {
		t.Fatal("imported a state of format 99")
	}
}

// TestImportUnderAnotherIDCopiesTheInstance: a state imported under
// another id is a copy that names its own id wherever the state named
// the original's (its bookmarks and timers, its history says where it
// came from), and both carry on: an event resumes each. Importing over an
// existing instance is refused unless a replace is asked for.
func TestImportUnderAnotherIDCopiesTheInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.save(approvalFlow)
	ctx := context.Background()
	inst, _, err := h.e.Start(ctx, "approval", json.RawMessage(`{"id": "x-2"}`), "order-1")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(inst.ID, weft.StatusSuspended)
	exported, err := h.e.Export(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}

	if _, _, err := h.e.Import(ctx, exported, engine.ImportOptions{}); !errors.Is(err, weft.ErrInstanceExists) || !strings.Contains(err.Error(), "order-1") {
		t.Fatalf("Import over order-1 without Replace: %v, want ErrInstanceExists naming it", err)
	}
	copied, created, err := h.e.Import(ctx, exported, engine.ImportOptions{ID: "order-2"})
	if err != nil || !created || copied.ID != "order-2" || copied.Status != weft.StatusSuspended || copied.Parent != nil {
		t.Fatalf("Import as order-2: %+v, created %v, %v; want a suspended copy, created", copied, created, err)
	}
	if exported.Instance.ID != "order-1" || exported.Bookmarks[0].InstanceID != "order-1" {
		t.Errorf("Import changed the state it was given: %+v", exported)
	}
	bms, err := h.store.Bookmarks(ctx, "order-2")
	if err != nil || len(bms) != 1 || bms[0].InstanceID != "order-2" {
		t.Errorf("the copy's bookmarks: %+v, %v; want one, of order-2", bms, err)
	}
	timers, err := h.store.Timers(ctx, "order-2")
	if err != nil || len(timers) != 1 || timers[0].InstanceID != "order-2" {
		t.Errorf("the copy's timers: %+v, %v; want its wait's timeout, of order-2", timers, err)
	}
	var from string
	for _, e := range h.history("order-2") {
		if e.Type == weft.HistoryInstanceImported {
			var d struct{ From string }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			from = d.From
		}
	}
	if from != "order-1" {
		t.Errorf("the copy's instance_imported says it came from %q, want order-1", from)
	}

	out, err := h.e.Signal(ctx, weft.Event{Name: "order.approved", Key: "x-2", Payload: map[string]any{"by": "both"}})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out.Resumed)
	if !slices.Equal(out.Resumed, []string{"order-1", "order-2"}) {
		t.Errorf("the event resumed %v, want order-1 and order-2", out.Resumed)
	}
	for _, id := range []string{"order-1", "order-2"} {
		if done := h.waitStatus(id, weft.StatusCompleted); string(done.Output) != `"both"` {
			t.Errorf("%s: output %s", id, done.Output)
		}
	}

	// Replacing is asked for: the finished original gets the suspended
	// state back.
	back, created, err := h.e.Import(ctx, exported, engine.ImportOptions{Replace: true})
	if err != nil || created || back.ID != "order-1" || back.Status != weft.StatusSuspended {
		t.Fatalf("Import over order-1 with Replace: %+v, created %v, %v; want it replaced, suspended", back, created, err)
	}
}

// TestImportOfACopyWaitingForAChildIsRefused: a copy of an instance that
// waits for its child would wait forever (the child reports to the
// original): it is refused, naming the child; the original's own id
// still takes the state.
func TestImportOfACopyWaitingForAChildIsRefused(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	parent, child := startHolder(ctx, t, h, "holder-copy")
	h.waitStatus(parent.ID, weft.StatusSuspended)
	st, err := h.e.Export(ctx, parent.ID)
	if err != nil {
		t.Fatal(err)
	}
	_, _, err = h.e.Import(ctx, st, engine.ImportOptions{ID: "holder-copy-2"})
	if !errors.Is(err, weft.ErrChildInFlight) || !errors.Is(err, weft.ErrInvalid) || !strings.Contains(err.Error(), child.ID) {
		t.Fatalf("Import of a copy waiting for %s: %v, want ErrChildInFlight naming the child", child.ID, err)
	}
	if _, err := h.store.GetInstance(ctx, "holder-copy-2"); !errors.Is(err, weft.ErrNotFound) {
		t.Errorf("the refused copy: %v, want none stored", err)
	}
	if _, _, err := h.e.Import(ctx, st, engine.ImportOptions{Replace: true}); err != nil {
		t.Errorf("Import under its own id: %v", err)
	}
}
