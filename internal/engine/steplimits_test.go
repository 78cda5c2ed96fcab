package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
)

// stepLimitFlows have a limit on an activity step: "stepslot" lets one
// attempt of kit.work (200ms) run at once per key; "steprate" starts at
// most 4 kit.echo attempts a second; "stepwait" holds its slot while its
// attempt works for input.ms, so that a second instance's attempt waits.
const stepLimitFlows = `
name: stepslot
steps:
  - id: work
    activity: kit.work
    input: { ms: 200 }
    concurrency: { key: "${ input.k }", limit: 1 }
---
name: steprate
steps:
  - id: ping
    activity: kit.echo
    input: "${ input }"
    rate_limit: { key: shared-api, limit: 4, per: 1s }
`

// stepHost is a host with the step-limit flows saved.
func stepHost(t *testing.T, redis bool) *host {
	t.Helper()
	h := concurrencyHost(t, redis)
	for _, src := range strings.Split(stepLimitFlows, "---\n") {
		h.save(src)
	}
	return h
}

// attemptSpan is when an instance's attempt that completed ran, by its
// history: from the activity_scheduled that no activity_deferred follows
// to its activity_completed.
func attemptSpan(t *testing.T, evs []weft.HistoryEntry) [2]time.Time {
	t.Helper()
	var span [2]time.Time
	for i, e := range evs {
		switch e.Type {
		case weft.HistoryActivityScheduled:
			if i+1 < len(evs) && evs[i+1].Type == weft.HistoryActivityDeferred {
				continue
			}
			span[0] = e.Time
		case weft.HistoryActivityCompleted:
			span[1] = e.Time
		}
	}
	if span[0].IsZero() || span[1].IsZero() {
		t.Fatalf("history %v: want an attempt that ran", historyTypes(evs))
	}
	return span
}

// deferrals counts an instance's activity_deferred entries for reason.
func deferrals(evs []weft.HistoryEntry, reason string) int {
	n := 0
	for _, e := range evs {
		if e.Type == weft.HistoryActivityDeferred && strings.Contains(string(e.Data), `"reason":"`+reason+`"`) {
			n++
		}
	}
	return n
}

// TestStepConcurrency: four instances whose work step has limit 1 on one
// key all complete, their attempts one at a time (from the histories);
// those that found the slot taken were deferred and woke when it was free.
func TestStepConcurrency(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		h := stepHost(t, redis)
		ctx := context.Background()
		var ids []string
		for i := range 4 {
			id := fmt.Sprintf("w%d", i)
			if _, _, err := h.e.Start(ctx, "stepslot", json.RawMessage(`{"k": "K"}`), id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		var spans [][2]time.Time
		deferred := 0
		for _, id := range ids {
			h.waitStatus(id, weft.StatusCompleted)
			evs := h.history(id)
			spans = append(spans, attemptSpan(t, evs))
			deferred += deferrals(evs, "concurrency")
		}
		if got := maxOverlap(spans); got != 1 {
			t.Fatalf("%d attempts ran at once, want 1", got)
		}
		if deferred == 0 {
			t.Fatal("no attempt was deferred: the test tested nothing")
		}
		// Nothing holds or waits any more.
		line, _, err := h.store.SlotLine(ctx, "step/K", "", 10)
		if err != nil || len(line) != 0 {
			t.Fatalf("the line of K: %v, %v; want it empty", line, err)
		}
		keys, _, err := h.store.SlotKeys(ctx, "step/", "", 10)
		if err != nil || len(keys) != 0 {
			t.Fatalf("step keys left: %+v, %v", keys, err)
		}
	})
}

// TestStepRateLimit: six instances whose step is limited to 4 a second
// start their attempts at least a quarter of a second apart, the later
// ones deferred durably (their turn was more than a moment away).
func TestStepRateLimit(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		h := stepHost(t, redis)
		ctx := context.Background()
		var ids []string
		for i := range 6 {
			id := fmt.Sprintf("r%d", i)
			if _, _, err := h.e.Start(ctx, "steprate", json.RawMessage(`{}`), id); err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		var ends []time.Time
		deferred := 0
		for _, id := range ids {
			h.waitStatus(id, weft.StatusCompleted)
			evs := h.history(id)
			ends = append(ends, attemptSpan(t, evs)[1])
			deferred += deferrals(evs, "rate_limit")
		}
		sort.Slice(ends, func(i, j int) bool { return ends[i].Before(ends[j]) })
		// Six starts at 4/s, burst 1: the last is 1.25s after the first;
		// an attempt ends after it starts, and the first ends soonest.
		if spread := ends[5].Sub(ends[0]); spread < 1200*time.Millisecond {
			t.Fatalf("the attempts ended within %s, want their starts spread over 1.25s", spread)
		}
		if deferred == 0 {
			t.Fatal("no attempt was deferred")
		}
	})
}

// TestStepSlotCancelledWaiter: an instance whose attempt waits for a step
// slot, cancelled, leaves the key's line; the holder's end leaves the key
// empty.
func TestStepSlotCancelledWaiter(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		h := stepHost(t, redis)
		h.save(`
name: stephold
steps:
  - id: work
    activity: kit.work
    input: { ms: "${ input.ms }" }
    concurrency: { key: hold, limit: 1 }
`)
		ctx := context.Background()
		if _, _, err := h.e.Start(ctx, "stephold", json.RawMessage(`{"ms": 1500}`), "holder"); err != nil {
			t.Fatal(err)
		}
		h.poll("the holder to hold the slot", func() bool {
			keys, _, err := h.store.SlotKeys(ctx, "step/hold", "", 1)
			return err == nil && len(keys) == 1 && len(keys[0].Holders) == 1
		})
		// The engine lists the steps' key, its holder an attempt of holder.
		keys, _, err := h.e.ConcurrencyKeys(ctx, "", "", 10)
		if err != nil || len(keys) != 1 || !keys[0].Step || keys[0].Key != "hold" || keys[0].Workflow != "" ||
			len(keys[0].Holders) != 1 || keys[0].Holders[0].Instance != "holder" {
			t.Fatalf("ConcurrencyKeys: %+v, %v; want the steps' key hold, held by an attempt of holder", keys, err)
		}
		if _, _, err := h.e.Start(ctx, "stephold", json.RawMessage(`{"ms": 1}`), "waiter"); err != nil {
			t.Fatal(err)
		}
		h.poll("the waiter to be in the line", func() bool {
			line, _, err := h.store.SlotLine(ctx, "step/hold", "", 10)
			return err == nil && len(line) == 1 && strings.HasSuffix(line[0].ID, "/waiter")
		})
		// Deferred, it is suspended: it waits without a worker.
		h.poll("the waiter to be suspended", func() bool { return h.statuses("waiter")[0] == "suspended" })
		if _, err := h.e.Cancel(ctx, "waiter", weft.Operation{Reason: "enough"}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus("waiter", weft.StatusCancelled)
		line, _, err := h.store.SlotLine(ctx, "step/hold", "", 10)
		if err != nil || len(line) != 0 {
			t.Fatalf("line after the cancellation: %v, %v", line, err)
		}
		h.waitStatus("holder", weft.StatusCompleted)
		h.poll("the key to empty", func() bool {
			keys, _, err := h.store.SlotKeys(ctx, "step/", "", 10)
			return err == nil && len(keys) == 0
		})
		if !slices.Contains(historyTypes(h.history("waiter")), weft.HistoryActivityDeferred) {
			t.Fatalf("the waiter's history %v has no activity_deferred", historyTypes(h.history("waiter")))
		}
	})
}

// TestStepSlotLeaseRunsOut: a step slot held by an attempt whose node died
// (its instance lives on: here, one waiting for an event) is given back
// when its lease runs out, never before; the attempt waiting for it then
// runs.
func TestStepSlotLeaseRunsOut(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		h := stepHost(t, redis)
		h.save(`
name: stephold
steps:
  - id: work
    activity: kit.work
    input: { ms: 1 }
    concurrency: { key: hold, limit: 1 }
`)
		ctx := context.Background()
		h.startGated("gate", "ghost", "G")
		lease := 1500 * time.Millisecond
		granted := time.Now()
		d, err := h.store.UpdateSlots(ctx, "step/hold", "e1/1/ghost", slots.Params{Limit: 1, Lease: lease}, granted, slots.Acquire)
		if err != nil || d.Outcome != slots.Granted {
			t.Fatalf("the dead attempt's slot: %+v, %v", d, err)
		}
		if _, _, err := h.e.Start(ctx, "stephold", json.RawMessage(`{}`), "next"); err != nil {
			t.Fatal(err)
		}
		done := h.waitStatus("next", weft.StatusCompleted)
		if ran := attemptSpan(t, h.history("next"))[0]; ran.Before(granted.Add(lease)) {
			t.Fatalf("the attempt ran at %s, before the dead holder's lease ended at %s", ran, granted.Add(lease))
		}
		if deferrals(h.history(done.ID), "concurrency") == 0 {
			t.Fatal("the attempt was never deferred: the slot was free")
		}
	})
}
