package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/plugins/call"
)

// fullDisk is a store whose disk is full for a number of commits: each
// commit of an existing instance fails with ENOSPC, as bbolt's write does,
// until full reaches 0; creates still go through.
type fullDisk struct {
	store.Store
	full atomic.Int32
}

func (s *fullDisk) Commit(ctx context.Context, c store.Commit) (uint64, error) {
	if c.Instance != nil && c.Instance.Rev != 0 && s.full.Add(-1) >= 0 {
		return 0, fmt.Errorf("writing instance %s: write weft.db: %w", c.Instance.ID, syscall.ENOSPC)
	}
	return s.Store.Commit(ctx, c)
}

// calls is the engine's Plugins around the real runtime: it records when
// each call began.
type calls struct {
	inner engine.Plugins
	mu    sync.Mutex
	at    []time.Time
}

func (c *calls) Invoke(ctx context.Context, version string, call call.Call) ([]byte, error) {
	c.mu.Lock()
	c.at = append(c.at, time.Now())
	c.mu.Unlock()
	return c.inner.Invoke(ctx, version, call)
}

func (c *calls) times() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Time(nil), c.at...)
}

// TestUncommittableRunsAreNotRepeatedBeforeTheirBackoff: while the store's
// disk is full, the run of an instance cannot commit what its activity
// did; the activity is called again only when the backoff says so
// (RecoveryInterval, doubling), for more than three failures, however
// often the recovery sweep finds the instance (it looks at it every turn:
// the clock says it has been pending for an hour). Once there is room, the
// instance completes, with one call per failed run and one more.
func TestUncommittableRunsAreNotRepeatedBeforeTheirBackoff(t *testing.T) {
	t.Parallel()
	const (
		interval = 20 * time.Millisecond
		failures = 6
	)
	clock := &jumpClock{}
	disk := &fullDisk{}
	disk.full.Store(failures)
	counted := &calls{}
	h := newHost(t,
		withStore(func(st store.Store) store.Store { disk.Store = st; return disk }),
		withPluginsWrapped(func(p engine.Plugins) engine.Plugins { counted.inner = p; return counted }),
		withConfig(engine.Config{NodeID: "n1", Now: clock.Now, TimerInterval: 10 * time.Millisecond, RecoveryInterval: interval, EagerStarts: true}))
	h.save(echoWorkflow)
	ctx := context.Background()
	inst, _, err := h.e.Start(ctx, "echo", json.RawMessage(`"pay"`), "")
	if err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Hour)

	deadline := time.Now().Add(60 * time.Second)
	var done *weft.Instance
	for {
		got, err := h.store.GetInstance(ctx, inst.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.Terminal() {
			done = got
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %s after 60s, with %d calls", inst.ID, got.Status, len(counted.times()))
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	if done.Status != weft.StatusCompleted || string(done.Output) != `"pay"` {
		t.Errorf("instance %s, output %s; want completed with \"pay\"", done.Status, done.Output)
	}
	at := counted.times()
	if len(at) != failures+1 {
		t.Errorf("the activity was called %d times, want %d: once per run that could not commit, and once more", len(at), failures+1)
	}
	// The timers fire no earlier than asked; a slow machine only adds.
	for i := 1; i < len(at); i++ {
		want := interval << (i - 1)
		if gap := at[i].Sub(at[i-1]); gap < want {
			t.Errorf("call %d came %s after call %d, want at least %s (the backoff after %d failed runs)", i+1, gap, i, want, i)
		}
	}
}
