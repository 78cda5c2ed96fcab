package local

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/lock"
)

func TestExpiredKeysAreSwept(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	l := New(Config{Now: clock, Logger: slog.New(slog.DiscardHandler)}).(*locker)

	leases := make([]lock.Lease, 0, 2*sweepEvery)
	for i := range 2 * sweepEvery {
		ls, ok, err := l.TryAcquire(t.Context(), fmt.Sprint("abandoned-", i), time.Second)
		if !ok || err != nil {
			t.Fatalf("TryAcquire: ok %v, error %v", ok, err)
		}
		leases = append(leases, ls)
	}
	mu.Lock()
	now = now.Add(time.Second)
	mu.Unlock()
	for range sweepEvery {
		ls, ok, err := l.TryAcquire(t.Context(), "busy", time.Hour)
		if !ok || err != nil {
			t.Fatalf("TryAcquire: ok %v, error %v", ok, err)
		}
		ls.Release(t.Context())
	}
	l.mu.Lock()
	n := len(l.held)
	l.mu.Unlock()
	if n != 0 {
		t.Errorf("%d entries left, want 0", n)
	}
	for _, ls := range leases[:10] {
		if err := ls.Extend(t.Context(), time.Second); !errors.Is(err, lock.ErrLost) {
			t.Fatalf("Extend of a swept lease = %v, want ErrLost", err)
		}
		ls.Release(t.Context())
	}
}

// TestReleaseWakesWaiters shows waiters are woken by the release itself:
// with a frozen clock and no periodic recheck, nothing else could wake them.
func TestReleaseWakesWaiters(t *testing.T) {
	t.Parallel()
	frozen := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	l := New(Config{Now: func() time.Time { return frozen }, Logger: slog.New(slog.DiscardHandler)}).(*locker)
	l.maxWait = time.Hour
	holder, ok, err := l.TryAcquire(t.Context(), "k", time.Hour)
	if !ok || err != nil {
		t.Fatalf("TryAcquire: ok %v, error %v", ok, err)
	}
	const waiters = 4
	got := make(chan error, waiters)
	for range waiters {
		go func() {
			ls, err := l.Acquire(t.Context(), "k", time.Hour)
			if err == nil {
				ls.Release(t.Context())
			}
			got <- err
		}()
	}
	holder.Release(t.Context())
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	for range waiters {
		select {
		case err := <-got:
			if err != nil {
				t.Fatalf("waiter: %v", err)
			}
		case <-timeout.C:
			t.Fatal("waiters not woken by releases")
		}
	}
}
