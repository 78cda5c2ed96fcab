package redisstore

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
)

// The protocols of the partitioned store, each interrupted where a node
// could die: what the relay loop (one sweep, run by hand here) finishes,
// and what a plugin delete's barrier holds off. The conformance suite
// (partitioned_test.go) covers the calls that finish.

// openRouter opens a partitioned store of n partitions on c whose loop
// never runs by itself (the tests call sweep).
func openRouter(t *testing.T, c redis.UniversalClient, n int, clock *fakeClock) *Partitioned {
	t.Helper()
	r, err := OpenPartitioned(t.Context(), PartitionedConfig{
		Config:     Config{Client: c, Prefix: fmt.Sprintf("r-%s:", t.Name()), Now: clock.Now, DeliveredRetention: testRetention},
		Partitions: n, RelayInterval: time.Hour, BarrierWait: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// idsApart returns two ids in different partitions of n.
func idsApart(n int) (a, b string) {
	a = "a"
	for i := 0; ; i++ {
		b = fmt.Sprintf("b%d", i)
		if partition.Of(a, n) != partition.Of(b, n) {
			return a, b
		}
	}
}

func TestPartitionedRelaysWhatACrashLeft(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := newFakeClock()
	r := openRouter(t, c, 4, clock)
	ctx := t.Context()
	parent, child := idsApart(4)
	for _, id := range []string{parent, child} {
		if _, err := r.Commit(ctx, store.Commit{Instance: pendingInstance(id)}); err != nil {
			t.Fatal(err)
		}
	}
	// The child's commit sends its end to the parent, and its node dies
	// before relaying it: the message is in the child's partition's
	// outbox only.
	in := pendingInstance(child)
	in.Rev, in.Status = 1, weft.StatusCompleted
	msg := weft.Message{InstanceID: parent, ID: "child:" + child, Kind: "child", Payload: json.RawMessage(`{"ok":true}`)}
	if _, _, err := r.part(child).commitTo(ctx, store.Commit{Instance: in, Send: []weft.Message{msg}}, []bool{true}); err != nil {
		t.Fatal(err)
	}
	inbox := func() []string {
		t.Helper()
		ms, err := r.Inbox(ctx, parent)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.ID)
		}
		return ids
	}
	if got := inbox(); len(got) != 0 {
		t.Fatalf("parent's inbox before the relay = %v, want empty", got)
	}
	// Younger than RelayAfter: its writer may be relaying it.
	if err := r.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inbox(); len(got) != 0 {
		t.Fatalf("a sweep relayed an entry younger than RelayAfter: inbox %v", got)
	}
	clock.Advance(DefaultRelayAfter + time.Second)
	if err := r.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := inbox(); !slices.Equal(got, []string{msg.ID}) {
		t.Fatalf("parent's inbox after the sweep = %v, want [%s]", got, msg.ID)
	}
	left, err := r.part(child).pendingOutbox(ctx, clock.Now().Add(time.Hour), 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Fatalf("the outbox still holds %d entries after the relay", len(left))
	}
	// The parent consumes it; a relay repeated late (a second node that
	// read the entry before the ack) does not write it again.
	p := pendingInstance(parent)
	p.Rev = 1
	if _, err := r.Commit(ctx, store.Commit{Instance: p, Consumed: []string{msg.ID}}); err != nil {
		t.Fatal(err)
	}
	doc := fmt.Sprintf(`{"instance_id":%q}`, parent) // any record: it must not be written
	late := outboxEntry{Source: r.part(child).p, ID: "1", Target: parent, MsgID: msg.ID, Doc: doc}
	if err := r.part(parent).receive(ctx, []outboxEntry{late}); err != nil {
		t.Fatal(err)
	}
	if got := inbox(); len(got) != 0 {
		t.Fatalf("a repeated relay wrote the consumed message again: inbox %v", got)
	}
}

func TestPartitionedSettlesLeftReservations(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := newFakeClock()
	r := openRouter(t, c, 4, clock)
	ctx := t.Context()
	if _, err := r.Commit(ctx, store.Commit{Instance: pendingInstance("i")}); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"s1", "s2"} {
		st := weft.Stimulus{ID: id, Name: "paid", Key: "k", ExpiresAt: clock.Now().Add(24 * time.Hour)}
		if _, err := r.EnqueueStimulus(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	pending := func() []string {
		t.Helper()
		ss, err := r.PendingStimuli(ctx, "paid", "k")
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, s := range ss {
			ids = append(ids, s.ID)
		}
		return ids
	}
	// s1: reserved, then the node died before its commit.
	if err := r.cat.reserveStimulus(ctx, "s1", "i", clock.Now(), clock.Now().Add(DefaultReserveFor)); err != nil {
		t.Fatal(err)
	}
	// s2: reserved and committed (the marker is in the partition), then
	// the node died before the confirmation.
	deadline := clock.Now().Add(DefaultReserveFor)
	if err := r.cat.reserveStimulus(ctx, "s2", "i", clock.Now(), deadline); err != nil {
		t.Fatal(err)
	}
	in := pendingInstance("i")
	in.Rev = 1
	commit := store.Commit{Instance: in, DeliveredStimulus: "s2", DeliveredOutcome: json.RawMessage(`"took it"`)}
	if _, _, err := r.part("i").commitMarked(ctx, commit, nil, reservationMarker("s2", deadline)); err != nil {
		t.Fatal(err)
	}
	if got := pending(); len(got) != 0 {
		t.Fatalf("pending while reserved = %v, want none", got)
	}
	// Before the deadline the sweep leaves both alone.
	if err := r.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pending(); len(got) != 0 {
		t.Fatalf("pending after a sweep before the deadline = %v, want none", got)
	}
	clock.Advance(DefaultReserveFor + time.Second)
	if err := r.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	if got := pending(); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("pending after the sweep = %v, want [s1] (released)", got)
	}
	s2, err := r.GetStimulus(ctx, "s2")
	if err != nil {
		t.Fatal(err)
	}
	if s2.State != weft.StimulusDelivered || s2.DeliveredTo != "i" || string(s2.Outcome) != `"took it"` {
		t.Errorf("s2 after the sweep: state %s, to %q, outcome %s; want delivered to i with its outcome", s2.State, s2.DeliveredTo, s2.Outcome)
	}
	// A commit the partition refuses gives its reservation back at once.
	stale := pendingInstance("i")
	stale.Rev = 1 // the stored rev is 2
	_, err = r.Commit(ctx, store.Commit{Instance: stale, DeliveredStimulus: "s1"})
	if !errors.Is(err, weft.ErrConflict) {
		t.Fatalf("stale commit consuming s1: %v, want a conflict", err)
	}
	if got := pending(); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("pending after a refused commit = %v, want [s1]", got)
	}
	// The sweep released s1 and marked that reservation released in the
	// partition: a new reservation of s1 by the same instance commits.
	cur := pendingInstance("i")
	cur.Rev = 2
	if _, err := r.Commit(ctx, store.Commit{Instance: cur, DeliveredStimulus: "s1"}); err != nil {
		t.Fatalf("consuming s1 after the sweep released it: %v", err)
	}
	s1, err := r.GetStimulus(ctx, "s1")
	if err != nil {
		t.Fatal(err)
	}
	if s1.State != weft.StimulusDelivered || s1.DeliveredTo != "i" {
		t.Errorf("s1 after its second reservation: state %s, to %q; want delivered to i", s1.State, s1.DeliveredTo)
	}
}

func TestPartitionedLiftsADeadDeletersBarrier(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := newFakeClock()
	r := openRouter(t, c, 4, clock)
	ctx := t.Context()
	if _, err := r.PutPlugin(ctx, weft.PluginRecord{Name: "pay", Version: "v1"}); err != nil {
		t.Fatal(err)
	}
	// A deleter fences the partitions and dies before it finishes.
	gen, barrier, err := r.cat.beginPluginDelete(ctx, "pay")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.copyGeneration(ctx, barrier, "test"); err != nil {
		t.Fatal(err)
	}
	// A create made from the catalog as it now is meets the barrier: the
	// router waits BarrierWait, lifts it, and the create reads again.
	cur, err := r.cat.generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cur != gen {
		t.Fatalf("catalog generation %q, want the deleter's %q", cur, gen)
	}
	in := pendingInstance("x")
	in.Plugins = map[string]string{"pay": "v1"}
	_, err = r.Commit(ctx, store.Commit{Instance: in, Catalog: cur})
	if !errors.Is(err, store.ErrCatalogChanged) {
		t.Fatalf("create at the barrier: %v, want ErrCatalogChanged", err)
	}
	lifted, err := r.cat.generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if generationOrder(lifted) <= generationOrder(barrier) {
		t.Fatalf("catalog generation %q after the wait, want one past the barrier %q", lifted, barrier)
	}
	if _, err := r.Commit(ctx, store.Commit{Instance: in, Catalog: lifted}); err != nil {
		t.Fatalf("create read again: %v", err)
	}
	// The dead deleter's finish, had it only been slow, deletes nothing.
	if err := r.cat.finishPluginDelete(ctx, "pay", gen, nil); !errors.Is(err, errCatalogMoved) {
		t.Fatalf("finish after the lift: %v, want errCatalogMoved", err)
	}
	if _, err := r.GetPlugin(ctx, "pay"); err != nil {
		t.Fatalf("the plugin after the lifted delete: %v", err)
	}
}

// TestPartitionedDeletePluginRacesCreates deletes a plugin while creates
// that pin it run on every partition: either the delete fails because an
// instance pins the plugin, or no create that pins it succeeded.
func TestPartitionedDeletePluginRacesCreates(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := newFakeClock()
	r := openRouter(t, c, 4, clock)
	ctx := t.Context()
	deleted := 0
	for round := range 8 {
		name := fmt.Sprintf("p%d", round)
		if _, err := r.PutPlugin(ctx, weft.PluginRecord{Name: name, Version: "v1"}); err != nil {
			t.Fatal(err)
		}
		var created atomic.Int64
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for w := range 4 {
			wg.Go(func() {
				for k := 0; ; k++ {
					select {
					case <-stop:
						return
					default:
					}
					in := pendingInstance(fmt.Sprintf("r%d-w%d-%d", round, w, k))
					in.Plugins = map[string]string{name: "v1"}
					_, err := r.Commit(ctx, store.Commit{Instance: in})
					switch {
					case err == nil:
						created.Add(1)
					case errors.Is(err, weft.ErrNotFound), errors.Is(err, store.ErrCatalogChanged):
					default:
						t.Errorf("create pinning %s: %v", name, err)
						return
					}
				}
			})
		}
		// Let some creates land first in even rounds, none in odd ones.
		if round%2 == 0 {
			deadline := time.Now().Add(10 * time.Second)
			for created.Load() == 0 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
		}
		err := r.DeletePlugin(ctx, name)
		close(stop)
		wg.Wait()
		switch {
		case err == nil:
			deleted++
			if n := created.Load(); n > 0 {
				// Every one of them must have been refused by the delete.
				t.Errorf("round %d: %s deleted, yet %d creates pinning it succeeded", round, name, n)
			}
		case errors.Is(err, weft.ErrInUse):
			if _, gerr := r.GetPlugin(ctx, name); gerr != nil {
				t.Errorf("round %d: delete refused as in use, but the plugin is gone: %v", round, gerr)
			}
		default:
			t.Fatalf("round %d: DeletePlugin: %v", round, err)
		}
	}
	t.Logf("%d of 8 deletes went through", deleted)
}

// TestSweepStripesShareThePartitions: every partition is in exactly one
// stripe, and a stripe's sweep reads answer from its partitions alone;
// the stripes together answer what the store does.
func TestSweepStripesShareThePartitions(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	clock := newFakeClock()
	const n = 6
	r := openRouter(t, c, n, clock)
	ctx := t.Context()
	stripes := r.SweepStripes()
	if len(stripes) != min(n, MaxSweepStripes) {
		t.Fatalf("%d stripes of %d partitions, want %d", len(stripes), n, min(n, MaxSweepStripes))
	}
	seen := map[*Store]int{}
	for _, l := range stripes {
		for _, p := range l.(*stripe).share {
			seen[p]++
		}
	}
	for i, p := range r.parts {
		if seen[p] != 1 {
			t.Fatalf("partition %d is in %d stripes, want 1", i, seen[p])
		}
	}
	// A timer due in each of 24 instances, spread over the partitions.
	due := clock.Now().Add(-time.Second)
	for i := range 24 {
		id := fmt.Sprintf("t%02d", i)
		in := pendingInstance(id)
		if _, err := r.Commit(ctx, store.Commit{Instance: in, Timers: []weft.Timer{{InstanceID: id, ID: "x", Due: due}}}); err != nil {
			t.Fatal(err)
		}
	}
	var union []string
	for li, l := range stripes {
		ts, err := l.DueTimers(ctx, clock.Now(), 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, tm := range ts {
			if !slices.Contains(l.(*stripe).share, r.part(tm.InstanceID)) {
				t.Errorf("stripe %d answered the timer of %s, of another stripe's partition", li, tm.InstanceID)
			}
			union = append(union, tm.InstanceID)
		}
		pending, _, err := l.ListInstances(ctx, weft.InstanceFilter{Status: weft.StatusPending})
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range pending {
			if !slices.Contains(l.(*stripe).share, r.part(in.ID)) {
				t.Errorf("stripe %d listed %s, of another stripe's partition", li, in.ID)
			}
		}
	}
	slices.Sort(union)
	all, err := r.DueTimers(ctx, clock.Now(), 100)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, tm := range all {
		want = append(want, tm.InstanceID)
	}
	slices.Sort(want)
	if !slices.Equal(union, want) || len(want) != 24 {
		t.Errorf("the stripes' due timers %v, the store's %v: want the same 24", union, want)
	}
}
