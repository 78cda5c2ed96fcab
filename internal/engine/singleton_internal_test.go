package engine

import (
	"context"
	"log/slog"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/lock/redislock"
)

// Singleton work (the sweeps) runs on one node at a time: two nodes, each
// with its own connection to a real Redis, run the same singleton loop;
// the work never overlaps, and it does happen.
func TestSingletonRunsOnOneNodeAtATime(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	var active, maxActive, runs atomic.Int32
	work := func(context.Context) {
		n := active.Add(1)
		for {
			m := maxActive.Load()
			if n <= m || maxActive.CompareAndSwap(m, n) {
				break
			}
		}
		runs.Add(1)
		time.Sleep(15 * time.Millisecond) // the work takes a while: a second runner would overlap it
		active.Add(-1)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, name := range []string{"a", "b"} {
		st, err := embedded.Open(filepath.Join(t.TempDir(), "store"), embedded.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		locks, err := redislock.New(redislock.Config{Clients: []redis.UniversalClient{srv.Client(t)}, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		e, err := New(Config{NodeID: name, Logger: slog.New(slog.DiscardHandler)}, st, locks, memqueue.New(1), nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			e.singleton(ctx, "weft-test-sweep", 5*time.Millisecond, singletonTTL(5*time.Millisecond), work)
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for runs.Load() < 40 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	cancel()
	wg.Wait()
	if runs.Load() < 40 {
		t.Fatalf("the singleton ran %d times in 30s", runs.Load())
	}
	if m := maxActive.Load(); m != 1 {
		t.Fatalf("%d runs of the singleton overlapped", m)
	}
}
