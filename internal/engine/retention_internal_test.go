package engine

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/lock/local"
)

// listingStore records the limits ExpiredInstances is called with and,
// when stale is set, answers with it instead: ids the index named before
// an import replaced the instance, or a delete removed it.
type listingStore struct {
	store.Store
	mu     sync.Mutex
	limits []int
	stale  []string
}

func (s *listingStore) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	s.mu.Lock()
	s.limits = append(s.limits, limit)
	stale := s.stale
	s.mu.Unlock()
	if stale != nil {
		return stale, nil
	}
	return s.Store.ExpiredInstances(ctx, now, limit)
}

func (s *listingStore) calls() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.limits
	s.limits = nil
	return out
}

// counted is an Observer that counts deletions by reason.
type counted struct {
	nopObserver
	mu sync.Mutex
	n  map[string]int
}

func (c *counted) InstancesDeleted(reason string, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n[reason] += n
}

// TestRetentionSweepBatches: one turn of the sweep asks for batches of
// RetentionBatch while they come back full, deletes what is due, skips an
// instance whose lock is held until a later turn, and leaves alone what is
// not due, not finished (a stale index entry) or gone.
func TestRetentionSweepBatches(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	bolt, err := embedded.Open(filepath.Join(t.TempDir(), "store"), embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	st := &listingStore{Store: bolt}
	now := time.Now()
	commit := func(id string, status weft.Status, deleteAfter time.Time) {
		t.Helper()
		in := &weft.Instance{ID: id, Workflow: "w", Version: 1, Status: status, DeleteAfter: deleteAfter}
		if _, err := st.Commit(ctx, store.Commit{Instance: in}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 7 {
		commit(fmt.Sprintf("due-%d", i), weft.StatusCompleted, now.Add(-time.Duration(7-i)*time.Minute))
	}
	commit("not-yet", weft.StatusFailed, now.Add(time.Minute))
	commit("live", weft.StatusRunning, time.Time{})

	locks := local.New(local.Config{})
	obs := &counted{n: map[string]int{}}
	e, err := New(Config{NodeID: "n1", Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now },
		RetentionBatch: 3, Observer: obs}, st, locks, memqueue.New(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	busy, err := locks.Acquire(ctx, InstanceLockKey("due-4"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}

	// Batches of 3: due-0..2 (all deleted), due-3..5 (due-4 busy), then
	// due-4 and due-6: short, the last.
	e.sweepRetention(ctx, e.store)
	if got, want := st.calls(), []int{3, 3, 3}; !slices.Equal(got, want) {
		t.Errorf("ExpiredInstances called with limits %v, want %v", got, want)
	}
	left := func() []string {
		t.Helper()
		items, _, err := st.ListInstances(ctx, weft.InstanceFilter{})
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, in := range items {
			ids = append(ids, in.ID)
		}
		slices.Sort(ids)
		return ids
	}
	if got, want := left(), []string{"due-4", "live", "not-yet"}; !slices.Equal(got, want) {
		t.Errorf("after the first turn, instances %v are left, want %v", got, want)
	}
	if obs.n[DeletedByRetention] != 6 {
		t.Errorf("observed %d deletions, want 6", obs.n[DeletedByRetention])
	}

	// Once free, the busy one goes at the next turn.
	busy.Release(ctx)
	e.sweepRetention(ctx, e.store)
	if got, want := st.calls(), []int{3}; !slices.Equal(got, want) {
		t.Errorf("second turn: ExpiredInstances called with limits %v, want %v", got, want)
	}
	if got, want := left(), []string{"live", "not-yet"}; !slices.Equal(got, want) {
		t.Errorf("after the second turn, instances %v are left, want %v", got, want)
	}
	if obs.n[DeletedByRetention] != 7 {
		t.Errorf("observed %d deletions, want 7", obs.n[DeletedByRetention])
	}

	// Stale entries: a live instance and a deleted one are left alone.
	st.mu.Lock()
	st.stale = []string{"live", "gone"}
	st.mu.Unlock()
	e.sweepRetention(ctx, e.store)
	if got, want := left(), []string{"live", "not-yet"}; !slices.Equal(got, want) {
		t.Errorf("after a turn on stale ids, instances %v are left, want %v", got, want)
	}
	if obs.n[DeletedByRetention] != 7 {
		t.Errorf("observed %d deletions after a turn on stale ids, want 7", obs.n[DeletedByRetention])
	}
}

// TestRetentionSweepStopsWithItsContext: a turn whose context ended
// deletes nothing more and returns.
func TestRetentionSweepStopsWithItsContext(t *testing.T) {
	t.Parallel()
	bolt, err := embedded.Open(filepath.Join(t.TempDir(), "store"), embedded.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bolt.Close() })
	now := time.Now()
	in := &weft.Instance{ID: "due", Workflow: "w", Version: 1, Status: weft.StatusCompleted, DeleteAfter: now}
	if _, err := bolt.Commit(context.Background(), store.Commit{Instance: in}); err != nil {
		t.Fatal(err)
	}
	e, err := New(Config{NodeID: "n1", Logger: slog.New(slog.DiscardHandler), Now: func() time.Time { return now }}, bolt, local.New(local.Config{}), memqueue.New(1), nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e.sweepRetention(ctx, e.store)
	if _, err := bolt.GetInstance(context.Background(), "due"); err != nil {
		t.Errorf("a cancelled sweep deleted the instance: %v", err)
	}
}
