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

// stripeView is one sweep stripe of a store: it counts the sweeps' reads
// it answers (from the whole store, here).
type stripeView struct {
	store.Store
	timers, leases, expired atomic.Int32
}

func (v *stripeView) DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error) {
	v.timers.Add(1)
	return v.Store.DueTimers(ctx, now, limit)
}

func (v *stripeView) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	v.leases.Add(1)
	return v.Store.ExpiredLeases(ctx, now, limit)
}

func (v *stripeView) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	v.expired.Add(1)
	return v.Store.ExpiredInstances(ctx, now, limit)
}

// stripedStore is a store with sweep stripes, as redisstore.Partitioned is.
type stripedStore struct {
	stripeView // the store's own sweep reads, counted too
	stripes    []*stripeView
}

func (s *stripedStore) SweepStripes() []store.Store {
	out := make([]store.Store, len(s.stripes))
	for i, l := range s.stripes {
		out[i] = l
	}
	return out
}

// TestSweepsRunPerStripe: on a store with sweep stripes, the recovery and
// retention sweeps read each stripe, under a try-lock each, and never the
// whole store; the timers sweep reads the whole store, and a timer fires.
func TestSweepsRunPerStripe(t *testing.T) {
	t.Parallel()
	st := &stripedStore{}
	cfg := engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, RecoveryInterval: 20 * time.Millisecond, RetentionInterval: 20 * time.Millisecond}
	h := newHost(t, withConfig(cfg), withStore(func(inner store.Store) store.Store {
		st.Store = inner
		for range 3 {
			st.stripes = append(st.stripes, &stripeView{Store: inner})
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
		for _, l := range st.stripes {
			all = all && l.leases.Load() > 0 && l.expired.Load() > 0
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			for i, l := range st.stripes {
				t.Logf("stripe %d: timers %d, leases %d, retention %d", i, l.timers.Load(), l.leases.Load(), l.expired.Load())
			}
			t.Fatal("a stripe was never swept")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if m, k := st.leases.Load(), st.expired.Load(); m+k > 0 {
		t.Errorf("the whole store's recovery and retention reads were called (leases %d, retention %d): the stripes should answer them", m, k)
	}
	if st.timers.Load() == 0 {
		t.Error("the timers sweep never read the whole store")
	}
	for i, l := range st.stripes {
		if n := l.timers.Load(); n > 0 {
			t.Errorf("stripe %d answered %d timer sweeps: the timers sweep is one", i, n)
		}
	}
}
