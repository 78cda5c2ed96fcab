package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/weftworks/weft/host/engine"
	"github.com/weftworks/weft/host/store"
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
	h.waitStatus(inst.ID, store.StatusSuspended)

	exported, err := h.e.Export(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	// Through JSON, as over HTTP.
	b, err := json.Marshal(exported)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.e.Delete(ctx, inst.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.GetInstance(ctx, inst.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("after Delete: %v, want ErrNotFound", err)
	}
	var back engine.State
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Bookmarks) != 1 || len(back.Timers) != 1 || len(back.Runner) == 0 {
		t.Fatalf("exported state %s: want its bookmark, timeout timer and runner state", b)
	}
	imported, err := h.e.Import(ctx, &back)
	if err != nil {
		t.Fatal(err)
	}
	if imported.ID != inst.ID || imported.Status != store.StatusSuspended {
		t.Fatalf("imported %s %s", imported.ID, imported.Status)
	}
	// It carries on where it was: waiting for its approval.
	if _, err := h.e.Signal(ctx, engine.Stimulus{Name: "order.approved", Key: "x-1", Payload: map[string]any{"by": "imported"}}); err != nil {
		t.Fatal(err)
	}
	done := h.waitStatus(inst.ID, store.StatusCompleted)
	if string(done.Output) != `"imported"` {
		t.Fatalf("output %s", done.Output)
	}
}

func TestImportRefusesUnknownFormat(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	if _, err := h.e.Import(context.Background(), &engine.State{Format: 99}); err == nil {
		t.Fatal("imported a state of format 99")
	}
}
