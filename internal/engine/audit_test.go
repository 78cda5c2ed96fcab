package engine_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/logtest"
)

// The audit of operator actions (docs/operations.md, "Audit"): who asked
// for a cancel, a retry, an import or a delete, why and when, recorded on
// the history entry of the action (its actor, its data's reason, batch and
// requested_at), or, for a delete, in the host's log.

// onlyEntry returns the one entry of type typ in the instance's history.
func onlyEntry(t *testing.T, h *host, id string, typ weft.HistoryType) weft.HistoryEntry {
	t.Helper()
	var found []weft.HistoryEntry
	for _, e := range h.history(id) {
		if e.Type == typ {
			found = append(found, e)
		}
	}
	if len(found) != 1 {
		t.Fatalf("instance %s: %d %s entries in its history %v, want one", id, len(found), typ, types(h.history(id)))
	}
	return found[0]
}

// entryData decodes a history entry's data.
func entryData(t *testing.T, e weft.HistoryEntry) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(e.Data, &m); err != nil {
		t.Fatalf("%s entry's data %s: %v", e.Type, e.Data, err)
	}
	return m
}

// wantOperation checks that e records op: its actor as the entry's, its
// reason, batch and time in the data (the time as given, or, when op has
// none, one within [from, to]).
func wantOperation(t *testing.T, e weft.HistoryEntry, op weft.Operation, from, to time.Time) {
	t.Helper()
	d := entryData(t, e)
	if e.Actor != op.Actor || d["reason"] != op.Reason {
		t.Errorf("%s entry: actor %q, reason %v; want %q, %q (data %s)", e.Type, e.Actor, d["reason"], op.Actor, op.Reason, e.Data)
	}
	if batch, _ := d["batch"].(string); batch != op.Batch {
		t.Errorf("%s entry: batch %q, want %q", e.Type, batch, op.Batch)
	}
	s, _ := d["requested_at"].(string)
	at, err := time.Parse(time.RFC3339Nano, s)
	switch {
	case err != nil:
		t.Errorf("%s entry: requested_at %v: %v", e.Type, d["requested_at"], err)
	case !op.At.IsZero() && !at.Equal(op.At):
		t.Errorf("%s entry: requested_at %s, want %s", e.Type, at, op.At)
	case op.At.IsZero() && (at.Before(from) || at.After(to)):
		t.Errorf("%s entry: requested_at %s, want the engine's time of the request, within [%s, %s]", e.Type, at, from, to)
	}
}

// TestCancelRecordsItsOperation: a cancel records who asked, why, the
// batch and when asked on its instance_cancelled entry, in either store (a
// message keeps its Op through both); the engine's clock gives the time
// when the operation has none.
func TestCancelRecordsItsOperation(t *testing.T) {
	t.Parallel()
	asked := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	bothStores(t, func(t *testing.T, redis bool) {
		var opts []hostOption
		if redis {
			opts = append(opts, withRedisStore())
		}
		h := newHost(t, opts...)
		h.save(approvalFlow)
		ctx := context.Background()
		for _, op := range []weft.Operation{
			{Actor: "alice", Reason: "withdrawn by the author", Batch: "b-1", At: asked},
			{Actor: weft.ActorAnonymous, Reason: "no time given"},
		} {
			inst, _, err := h.e.Start(ctx, "approval", json.RawMessage(`{"id": "x"}`), "")
			if err != nil {
				t.Fatal(err)
			}
			h.waitStatus(inst.ID, weft.StatusSuspended)
			from := time.Now()
			if _, err := h.e.Cancel(ctx, inst.ID, op); err != nil {
				t.Fatal(err)
			}
			to := time.Now()
			got := h.waitStatus(inst.ID, weft.StatusCancelled)
			if got.Error == nil || got.Error.Message != op.Reason {
				t.Errorf("instance %s: error %+v, want the reason %q", inst.ID, got.Error, op.Reason)
			}
			wantOperation(t, onlyEntry(t, h, inst.ID, weft.HistoryInstanceCancelled), op, from, to)
		}
	})
}

// TestRetryRecordsItsOperation: a retry records who asked, why and when on
// its instance_retried entry, beside the failure it retried.
func TestRetryRecordsItsOperation(t *testing.T) {
	t.Parallel()
	h := newHost(t, withPluginsWrapped(func(p engine.Plugins) engine.Plugins { return &failingFirst{inner: p} }))
	h.save("name: again\nsteps: [{id: a, activity: kit.echo, input: 1, retry: {max_attempts: 1}}]")
	failed := h.finish("again", nil)
	if failed.Status != weft.StatusFailed {
		t.Fatalf("first run: %s, want failed", failed.Status)
	}
	op := weft.Operation{Actor: "bob", Reason: "the service is back"}
	from := time.Now()
	if err := h.e.Retry(context.Background(), failed.ID, op); err != nil {
		t.Fatal(err)
	}
	to := time.Now()
	completedAfterRetry(t, h, failed.ID)
	e := onlyEntry(t, h, failed.ID, weft.HistoryInstanceRetried)
	wantOperation(t, e, op, from, to)
	if d := entryData(t, e); d["step"] != "steps[0]" || d["code"] == nil {
		t.Errorf("instance_retried data %s: want the failure's step steps[0] and its code", e.Data)
	}
}

// TestEngineCancelsRecordTheEngine: the cancels the host makes on its own
// record the actor "engine" and say why: a concurrency policy's
// (cancel_newest, cancel_oldest) and a parent's end cancelling its child.
func TestEngineCancelsRecordTheEngine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// cancel makes the host cancel an instance on its own, and
		// returns its id.
		cancel     func(t *testing.T, h *host) string
		wantReason string
	}{
		{name: "cancel_newest", wantReason: "the policy is cancel_newest", cancel: func(t *testing.T, h *host) string {
			h.startGated("newest", "n1", "K")
			h.startGated("newest", "n2", "K")
			return "n2"
		}},
		{name: "cancel_oldest", wantReason: "the policy is cancel_oldest", cancel: func(t *testing.T, h *host) string {
			h.startGated("oldest", "o1", "K")
			h.startGated("oldest", "o2", "K")
			return "o1"
		}},
		{name: "parent ended", wantReason: "parent holder-1 ended", cancel: func(t *testing.T, h *host) string {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			parent, child := startHolder(ctx, t, h, "holder-1")
			if _, err := h.e.Cancel(ctx, parent.ID, weft.Operation{Actor: "alice", Reason: "done with it"}); err != nil {
				t.Fatal(err)
			}
			return child.ID
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := concurrencyHost(t, false)
			id := tt.cancel(t, h)
			h.waitStatus(id, weft.StatusCancelled)
			e := onlyEntry(t, h, id, weft.HistoryInstanceCancelled)
			d := entryData(t, e)
			if reason, _ := d["reason"].(string); e.Actor != weft.ActorEngine || !strings.Contains(reason, tt.wantReason) || d["requested_at"] == nil {
				t.Errorf("instance %s: instance_cancelled by %q with data %s; want by engine, a reason containing %q, and a time", id, e.Actor, e.Data, tt.wantReason)
			}
		})
	}
}

// TestImportAndDeleteRecordTheirOperation: an import records its
// operation on the instance_imported entry (with where a copy came from);
// a delete, whose history goes with the instance, logs it.
func TestImportAndDeleteRecordTheirOperation(t *testing.T) {
	t.Parallel()
	logs := &logtest.Buffer{}
	h := newHost(t, withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(logs, nil))}))
	h.save(approvalFlow)
	ctx := context.Background()
	inst, _, err := h.e.Start(ctx, "approval", json.RawMessage(`{"id": "x"}`), "order-1")
	if err != nil {
		t.Fatal(err)
	}
	h.waitStatus(inst.ID, weft.StatusSuspended)
	exported, err := h.e.Export(ctx, inst.ID)
	if err != nil {
		t.Fatal(err)
	}
	op := weft.Operation{Actor: "alice", Reason: "moved from staging", At: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
	if _, _, err := h.e.Import(ctx, exported, engine.ImportOptions{ID: "order-2", Op: op}); err != nil {
		t.Fatal(err)
	}
	e := onlyEntry(t, h, "order-2", weft.HistoryInstanceImported)
	wantOperation(t, e, op, time.Time{}, time.Time{})
	if d := entryData(t, e); d["from"] != "order-1" {
		t.Errorf("instance_imported data %s: want from order-1", e.Data)
	}

	if _, err := h.e.Cancel(ctx, "order-2", weft.Operation{Actor: "alice", Reason: "a copy"}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus("order-2", weft.StatusCancelled)
	if err := h.e.Delete(ctx, "order-2", weft.Operation{Actor: "bob", Reason: "cleaning up", Batch: "b-7"}); err != nil {
		t.Fatal(err)
	}
	var line map[string]any
	for l := range strings.Lines(logs.String()) {
		if err := json.Unmarshal([]byte(l), &line); err == nil && line["msg"] == "instance deleted" {
			break
		}
		line = nil
	}
	want := map[string]any{"level": "INFO", "instance": "order-2", "workflow": "approval", "status": "cancelled", "actor": "bob", "reason": "cleaning up", "batch": "b-7"}
	for k, v := range want {
		if line[k] != v {
			t.Errorf("the log line of the delete: %s = %v, want %v (line %v)", k, line[k], v, line)
		}
	}
}
