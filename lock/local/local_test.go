package local_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/local"
	"github.com/weftworks/weft/lock/locktest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	locktest.Exercise(t, func(t *testing.T) lock.Locker {
		return local.New(local.Config{Logger: discard()})
	})
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// clock is a fake clock, safe for concurrent use.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock {
	return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func try(t *testing.T, l lock.Locker, key string, ttl time.Duration, want bool) lock.Lease {
	t.Helper()
	ls, ok, err := l.TryAcquire(t.Context(), key, ttl)
	if err != nil || ok != want {
		t.Fatalf("TryAcquire(%q) = ok %v, error %v; want ok %v", key, ok, err, want)
	}
	return ls
}

func TestExpiryByClock(t *testing.T) {
	t.Parallel()
	clk := newClock()
	var logs logtest.Buffer
	l := local.New(local.Config{Now: clk.Now, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	const ttl = 10 * time.Second

	old := try(t, l, "k", ttl, true)
	if want := clk.Now().Add(ttl); !old.Expiry().Equal(want) {
		t.Errorf("Expiry() = %v, want %v", old.Expiry(), want)
	}
	clk.Advance(ttl - time.Nanosecond)
	try(t, l, "k", ttl, false)

	// Extend counts from now, not from the old expiry.
	if err := old.Extend(t.Context(), ttl); err != nil {
		t.Fatalf("Extend before expiry: %v", err)
	}
	if want := clk.Now().Add(ttl); !old.Expiry().Equal(want) {
		t.Errorf("Expiry() after Extend = %v, want %v", old.Expiry(), want)
	}
	clk.Advance(ttl - time.Nanosecond)
	try(t, l, "k", ttl, false)

	// Expiry is inclusive: at the expiry instant the key is free.
	clk.Advance(time.Nanosecond)
	next := try(t, l, "k", ttl, true)
	if next.Token() <= old.Token() {
		t.Errorf("token %d after expiry not above %d", next.Token(), old.Token())
	}
	if err := old.Extend(t.Context(), ttl); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Extend of the expired lease = %v, want ErrLost", err)
	}
	old.Release(t.Context())
	try(t, l, "k", ttl, false)
	if got := logs.String(); !strings.Contains(got, "lock lease lost before release") || !strings.Contains(got, "key=k") {
		t.Errorf("logs = %q, want a warning about the lost lease", got)
	}
	next.Release(t.Context())
	try(t, l, "k", ttl, true)
}

func TestExtendAtExpiryFails(t *testing.T) {
	t.Parallel()
	clk := newClock()
	l := local.New(local.Config{Now: clk.Now, Logger: discard()})
	ls := try(t, l, "k", time.Second, true)
	clk.Advance(time.Second)
	// Nobody took the key, but the lease is over: it is not revived.
	if err := ls.Extend(t.Context(), time.Second); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Extend at expiry = %v, want ErrLost", err)
	}
	try(t, l, "k", time.Second, true)
}

func TestTokensFollowClock(t *testing.T) {
	t.Parallel()
	clk := newClock()
	first := local.New(local.Config{Now: clk.Now, Logger: discard()})
	a := try(t, first, "k", time.Second, true)
	if floor := uint64(clk.Now().UnixMicro()); a.Token() < floor {
		t.Errorf("token %d below the clock's Unix microseconds %d", a.Token(), floor)
	}
	a.Release(t.Context())
	// Tokens stay strictly increasing while the clock stands still…
	b := try(t, first, "k", time.Second, true)
	if b.Token() != a.Token()+1 {
		t.Errorf("token %d, want %d", b.Token(), a.Token()+1)
	}
	// …and a restarted process (a new Locker) a millisecond later starts
	// above every token of the old one.
	clk.Advance(time.Millisecond)
	second := local.New(local.Config{Now: clk.Now, Logger: discard()})
	c := try(t, second, "k", time.Second, true)
	if c.Token() <= b.Token() {
		t.Errorf("token %d after restart not above %d", c.Token(), b.Token())
	}
}

func TestWaiterNoticesClock(t *testing.T) {
	t.Parallel()
	clk := newClock()
	l := local.New(local.Config{Now: clk.Now, Logger: discard()})
	holder := try(t, l, "k", time.Hour, true)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	got := make(chan error, 1)
	go func() {
		ls, err := l.Acquire(ctx, "k", time.Hour)
		if err == nil && ls.Token() <= holder.Token() {
			err = errors.New("token did not increase")
		}
		got <- err
	}()
	// The holder never releases: only the clock moving past its expiry lets
	// the waiter in, within its bounded wait.
	clk.Advance(time.Hour)
	if err := <-got; err != nil {
		t.Fatalf("waiting Acquire: %v", err)
	}
}
