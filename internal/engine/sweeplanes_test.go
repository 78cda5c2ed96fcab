package engine_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/store"
)

// laneView is one sweep lane of a store: it counts the sweeps' reads it
// answers (from the whole store, here).
type laneView struct {
	store.Store
	timers, leases, expired atomic.Int32
}

func (v *laneView) DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error) {
	v.timers.Add(1)
	return v.Store.DueTimers(ctx, now, limit)
}

func (v *laneView) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	v.leases.Add(1)
	return v.Store.ExpiredLeases(ctx, now, limit)
}

func (v *laneView) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	v.expired.Add(1)
	return v.Store.ExpiredInstances(ctx, now, limit)
}

// lanedStore is a store with sweep lanes, as redisstore.Partitioned is.
type lanedStore struct {
	laneView // the store's own sweep reads, counted too
	lanes    []*laneView
}

func (s *lanedStore) SweepLanes() []store.Store {
	out := make([]store.Store, len(s.lanes))
	for i, l := range s.lanes {
		out[i] = l
	}
	return out
}

// TestSweepsRunPerLane: on a store with sweep lanes, the recovery and
// retention sweeps read each lane, under a try-lock each, and never the
// whole store; the timers sweep reads the whole store, and a timer fires.
func TestSweepsRunPerLane(t *testing.T) {
	t.Parallel()
	st := &lanedStore{}
	cfg := engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, RecoveryInterval: 20 * time.Millisecond, RetentionInterval: 20 * time.Millisecond}
	h := newHost(t, withConfig(cfg), withStore(func(inner store.Store) store.Store {
		st.Store = inner
		for range 3 {
			st.lanes = append(st.lanes, &laneView{Store: inner})
		}
		return st
	}))
	h.save(`
name: nap
steps:
  - { id: rest, delay: 30ms }
output: done
`)
	if got := h.finish("nap", nil); got.Status != weft.StatusCompleted {
		t.Fatalf("the timer's instance is %s, want completed", got.Status)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		all := true
		for _, l := range st.lanes {
			all = all && l.leases.Load() > 0 && l.expired.Load() > 0
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			for i, l := range st.lanes {
				t.Logf("lane %d: timers %d, leases %d, retention %d", i, l.timers.Load(), l.leases.Load(), l.expired.Load())
			}
			t.Fatal("a lane was never swept")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m, k := st.leases.Load(), st.expired.Load(); m+k > 0 {
		t.Errorf("the whole store's recovery and retention reads were called (leases %d, retention %d): the lanes should answer them", m, k)
	}
	if st.timers.Load() == 0 {
		t.Error("the timers sweep never read the whole store")
	}
	for i, l := range st.lanes {
		if n := l.timers.Load(); n > 0 {
			t.Errorf("lane %d answered %d timer sweeps: the timers sweep is one", i, n)
		}
	}
}
