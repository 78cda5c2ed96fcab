package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// concurrencyFlows limit their instances per input.c: "gate" waits for an
// event "go" keyed by the instance's input.id, so a test decides when each
// ends; "quick" ends at once.
const concurrencyFlows = `
name: gate
concurrency: { key: "${ input.c }", limit: 2 }
steps:
  - { id: wait, wait: { event: go, key: "${ input.id }" } }
---
name: newest
concurrency: { key: "${ input.c }", limit: 1, policy: cancel_newest }
steps:
  - { id: wait, wait: { event: go, key: "${ input.id }" } }
---
name: oldest
concurrency: { key: "${ input.c }", limit: 1, policy: cancel_oldest }
steps:
  - { id: wait, wait: { event: go, key: "${ input.id }" } }
---
name: quick
concurrency: { key: "${ input.c }", limit: 3 }
steps:
  - { id: nap, delay: 1ms }
  - { id: done, set: { ok: true } }
`

// concurrencyHost is a host with the concurrency flows saved, and a
// recovery sweep (which runs the slots sweep) every 50ms.
func concurrencyHost(t *testing.T, redis bool, opts ...hostOption) *host {
	t.Helper()
	opts = append([]hostOption{withConfig(engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, RecoveryInterval: 50 * time.Millisecond})}, opts...)
	if redis {
		opts = append(opts, withRedisStore())
	}
	h := newHost(t, opts...)
	for _, src := range strings.Split(concurrencyFlows, "---\n") {
		h.save(src)
	}
	return h
}

// bothStores runs a test on the embedded store and on Redis.
func bothStores(t *testing.T, test func(t *testing.T, redis bool)) {
	for _, redis := range []bool{false, true} {
		name := "bolt"
		if redis {
			name = "redis"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			test(t, redis)
		})
	}
}

// startGated starts an instance of workflow with key c and waits until it
// holds a slot (suspended on its event) or waits for one (marked
// waiting), so that the next start comes after it in its key's line.
func (h *host) startGated(workflow, id, c string) *weft.Instance {
	h.t.Helper()
	ctx := context.Background()
	in := fmt.Sprintf(`{"id": %q, "c": %q}`, id, c)
	if _, _, err := h.e.Start(ctx, workflow, json.RawMessage(in), id); err != nil {
		h.t.Fatalf("starting %s: %v", id, err)
	}
	var inst *weft.Instance
	h.poll(fmt.Sprintf("%s to run or wait for a slot", id), func() bool {
		var err error
		inst, err = h.store.GetInstance(ctx, id)
		if err != nil {
			h.t.Fatal(err)
		}
		return inst.Status != weft.StatusPending || (inst.Concurrency != nil && !inst.Concurrency.WaitingSince.IsZero())
	})
	return inst
}

// poll waits, with a deadline, until cond holds.
func (h *host) poll(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// release sends the event that ends a gate instance.
func (h *host) release(id string) {
	h.t.Helper()
	if _, err := h.e.Signal(context.Background(), weft.Event{ID: "go-" + id, Name: "go", Key: id}); err != nil {
		h.t.Fatal(err)
	}
}

// statuses reads the statuses of ids, "waiting" for a pending instance in
// its key's line.
func (h *host) statuses(ids ...string) []string {
	h.t.Helper()
	out := make([]string, len(ids))
	for i, id := range ids {
		inst, err := h.store.GetInstance(context.Background(), id)
		if err != nil {
			h.t.Fatal(err)
		}
		out[i] = string(inst.Status)
		if inst.Status == weft.StatusPending && inst.Concurrency != nil && !inst.Concurrency.WaitingSince.IsZero() {
			out[i] = "waiting"
		}
	}
	return out
}

// keyOf returns the concurrency key of workflow as the engine shows it,
// with its line; nil when nothing runs or waits under it.
func (h *host) keyOf(workflow, key string) (*weft.ConcurrencyKey, []string) {
	h.t.Helper()
	k, line, _, err := h.e.ConcurrencyLine(context.Background(), workflow, key, "", 100)
	if errors.Is(err, weft.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	for _, w := range line {
		ids = append(ids, w.Instance)
	}
	return k, ids
}

// TestConcurrencyQueue: with limit 2, the third instance of a key waits,
// marked so and recorded in its history, while another key's runs; an
// ending instance hands its slot to the first in line; a waiting
// instance that is cancelled leaves the line; and the key is gone once
// nothing runs under it.
func TestConcurrencyQueue(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		h := concurrencyHost(t, redis)
		for _, id := range []string{"a1", "a2", "a3", "a4", "a5"} {
			h.startGated("gate", id, "A")
		}
		h.startGated("gate", "b1", "B")
		if got, want := h.statuses("a1", "a2", "a3", "a4", "a5", "b1"), []string{"suspended", "suspended", "waiting", "waiting", "waiting", "suspended"}; !slices.Equal(got, want) {
			t.Fatalf("statuses %v, want %v", got, want)
		}
		k, line := h.keyOf("gate", "A")
		if k == nil || k.Running != 2 || k.Waiting != 3 || k.Limit != 2 || k.Policy != "queue" || !slices.Equal(line, []string{"a3", "a4", "a5"}) {
			t.Fatalf("key A: %+v, line %v", k, line)
		}
		if got := []string{k.Holders[0].Instance, k.Holders[1].Instance}; !slices.Equal(got, []string{"a1", "a2"}) {
			t.Fatalf("holders %v, want a1 a2", got)
		}
		if !slices.Contains(historyTypes(h.history("a3")), weft.HistorySlotWaiting) {
			t.Fatalf("a3's history %v has no %s", historyTypes(h.history("a3")), weft.HistorySlotWaiting)
		}
		// a1 ends: a3 runs, a4 and a5 wait.
		h.release("a1")
		h.waitStatus("a1", weft.StatusCompleted)
		h.poll("a3 to run", func() bool { return h.statuses("a3")[0] == "suspended" })
		if got, want := h.statuses("a4", "a5"), []string{"waiting", "waiting"}; !slices.Equal(got, want) {
			t.Fatalf("a4 a5: %v, want %v", got, want)
		}
		evs := h.history("a3")
		if types := historyTypes(evs); slices.Index(types, weft.HistorySlotAcquired) < slices.Index(types, weft.HistorySlotWaiting) || slices.Index(types, weft.HistorySlotAcquired) > slices.Index(types, weft.HistoryInstanceStarted) {
			t.Fatalf("a3's history %v: want slot_waiting, then slot_acquired, then instance_started", types)
		}
		// a5 is cancelled while it waits: it leaves the line.
		if _, err := h.e.Cancel(context.Background(), "a5", weft.Operation{Reason: "no longer needed"}); err != nil {
			t.Fatal(err)
		}
		h.waitStatus("a5", weft.StatusCancelled)
		if _, line := h.keyOf("gate", "A"); !slices.Equal(line, []string{"a4"}) {
			t.Fatalf("line after a5's cancellation: %v, want a4", line)
		}
		h.release("a2")
		h.poll("a4 to run", func() bool { return h.statuses("a4")[0] == "suspended" })
		for _, id := range []string{"a3", "a4", "b1"} {
			h.release(id)
			h.waitStatus(id, weft.StatusCompleted)
		}
		h.poll("the keys to go", func() bool {
			keys, _, err := h.e.ConcurrencyKeys(context.Background(), "gate", "", 10)
			if err != nil {
				t.Fatal(err)
			}
			return len(keys) == 0
		})
	})
}

func historyTypes(evs []weft.HistoryEntry) []weft.HistoryType {
	out := make([]weft.HistoryType, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// TestConcurrencyCancelPolicies: cancel_newest cancels the newcomer at a
// full key; cancel_oldest cancels the oldest, and the newcomer runs once
// the cancelled one has ended.
func TestConcurrencyCancelPolicies(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		h := concurrencyHost(t, redis)
		h.startGated("newest", "n1", "K")
		h.startGated("newest", "n2", "K")
		n2 := h.waitStatus("n2", weft.StatusCancelled)
		if n2.Error == nil || !strings.Contains(n2.Error.Message, "cancel_newest") {
			t.Fatalf("n2's error %+v: want the policy named", n2.Error)
		}
		if got := h.statuses("n1"); got[0] != "suspended" {
			t.Fatalf("n1 is %s, want suspended", got[0])
		}

		h.startGated("oldest", "o1", "K")
		h.startGated("oldest", "o2", "K")
		o1 := h.waitStatus("o1", weft.StatusCancelled)
		if o1.Error == nil || !strings.Contains(o1.Error.Message, "cancel_oldest") {
			t.Fatalf("o1's error %+v: want the policy named", o1.Error)
		}
		h.poll("o2 to run", func() bool { return h.statuses("o2")[0] == "suspended" })
		h.release("o2")
		h.waitStatus("o2", weft.StatusCompleted)
	})
}

// TestConcurrencyLimitHolds: 200 instances of one key started at once with
// limit 3 all complete, and their histories show at most 3 running at any
// moment (from instance_started to their end).
func TestConcurrencyLimitHolds(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		h := concurrencyHost(t, redis)
		ctx := context.Background()
		const n = 200
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, _, err := h.e.Start(ctx, "quick", json.RawMessage(`{"c": "K"}`), fmt.Sprintf("q%03d", i))
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		var spans [][2]time.Time
		for i := range n {
			id := fmt.Sprintf("q%03d", i)
			h.waitStatus(id, weft.StatusCompleted)
			spans = append(spans, runSpan(t, h.history(id)))
		}
		if got := maxOverlap(spans); got > 3 || got < 1 {
			t.Fatalf("at most %d instances ran at once, want 1 to 3", got)
		}
	})
}

// runSpan is when an instance ran by its history: from instance_started
// to its end.
func runSpan(t *testing.T, evs []weft.HistoryEntry) [2]time.Time {
	t.Helper()
	var span [2]time.Time
	for _, e := range evs {
		switch e.Type {
		case weft.HistoryInstanceStarted:
			span[0] = e.Time
		case weft.HistoryInstanceCompleted, weft.HistoryInstanceFailed, weft.HistoryInstanceCancelled:
			span[1] = e.Time
		}
	}
	if span[0].IsZero() || span[1].IsZero() {
		t.Fatalf("history %v: want a start and an end", historyTypes(evs))
	}
	return span
}

// maxOverlap is the most spans open at one moment; a span that ends at
// the moment another starts does not overlap it.
func maxOverlap(spans [][2]time.Time) int {
	type edge struct {
		at    time.Time
		delta int
	}
	var edges []edge
	for _, s := range spans {
		edges = append(edges, edge{s[0], +1}, edge{s[1], -1})
	}
	sort.Slice(edges, func(i, j int) bool {
		if !edges[i].at.Equal(edges[j].at) {
			return edges[i].at.Before(edges[j].at)
		}
		return edges[i].delta < edges[j].delta // ends first
	})
	n, most := 0, 0
	for _, e := range edges {
		n += e.delta
		most = max(most, n)
	}
	return most
}

// lostRelease is a store whose first release of a slot is lost: as if the
// node died between the commit that ended an instance and the release.
type lostRelease struct {
	store.Store
	failed atomic.Bool
}

func (s *lostRelease) UpdateSlots(ctx context.Context, key, id string, p slots.Params, now time.Time, op store.SlotOp) (slots.Decision, error) {
	// Tell a release by its effect: a release of a holder frees a slot.
	d, err := s.Store.UpdateSlots(ctx, key, id, p, now, func(st slots.State, id string, p slots.Params, now time.Time) (slots.State, slots.Decision, error) {
		next, d, err := op(st, id, p, now)
		if err == nil && d.Outcome == slots.Released && s.failed.CompareAndSwap(false, true) {
			return st, slots.Decision{}, errInjected
		}
		return next, d, err
	})
	return d, err
}

// Commit drops the first release that goes with a commit: Redis applies
// it after the commit, and a node may die in between.
func (s *lostRelease) Commit(ctx context.Context, c store.Commit) (uint64, error) {
	if c.Slot != nil && c.Instance.Status.Terminal() && s.failed.CompareAndSwap(false, true) {
		c.Slot = nil
	}
	return s.Store.Commit(ctx, c)
}

var errInjected = errors.New("injected: the node died")

// TestConcurrencySweepReclaims: a slot whose release was lost (its
// instance completed) is given back by the slots sweep, and the instance
// waiting for it runs; a deleted instance gives its slot back too.
func TestConcurrencySweepReclaims(t *testing.T) {
	t.Parallel()
	bothStores(t, func(t *testing.T, redis bool) {
		lost := &lostRelease{}
		h := concurrencyHost(t, redis, withStore(func(s store.Store) store.Store { lost.Store = s; return lost }))
		h.startGated("newest", "x0", "other") // a key of its own, never in the way
		h.startGated("gate", "s1", "S")
		h.startGated("gate", "s2", "S")
		h.startGated("gate", "s3", "S")
		h.release("s1")
		h.waitStatus("s1", weft.StatusCompleted)
		// Its release failed; the sweep gives the slot back.
		h.poll("s3 to run", func() bool { return h.statuses("s3")[0] == "suspended" })
		if !lost.failed.Load() {
			t.Fatal("no release failed: the test tested nothing")
		}
		// Deleted while it waits or holds: the slot returns at once.
		h.startGated("gate", "s4", "S")
		if err := h.e.Delete(context.Background(), "s2", weft.Operation{}); err != nil {
			t.Fatal(err)
		}
		h.poll("s4 to run", func() bool { return h.statuses("s4")[0] == "suspended" })
	})
}
