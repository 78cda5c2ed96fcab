// Package locktest is the conformance suite every [lock.Locker] runs:
// Exercise states the Locker contract as tests.
//
// The suite uses real time with short TTLs, and waits for conditions by
// polling with deadlines, so it runs unchanged against a backend whose
// clock it cannot control (Redis). It never depends on a fake clock; an
// implementation tests clock edge cases in its own tests.
package locktest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/lock"
)

const (
	// long is a TTL no test outlives; leases that must not expire use it.
	long = time.Minute
	// short is a TTL meant to expire during a test. Long enough for an
	// acquisition to complete within it on a loaded machine (Redis refuses
	// one that took longer than its ttl allows), short enough for the
	// tests that wait for it to expire.
	short = 500 * time.Millisecond
	// patience bounds every wait for something that must happen.
	patience = 10 * time.Second
)

// Exercise runs the conformance suite against the Lockers newLocker
// returns. newLocker is called once per subtest; Lockers it returns may
// share a backend, since every subtest uses keys of its own. Every subtest
// runs in parallel.
func Exercise(t *testing.T, newLocker func(t *testing.T) lock.Locker) {
	t.Helper()
	tests := []struct {
		name string
		run  func(t *testing.T, l lock.Locker)
	}{
		{"Accessors", testAccessors},
		{"InvalidArguments", testInvalidArguments},
		{"DoneContext", testDoneContext},
		{"MutualExclusionHammer", testMutualExclusionHammer},
		{"TryAcquireHammer", testTryAcquireHammer},
		{"TokensIncrease", testTokensIncrease},
		{"TryAcquireWhileHeld", testTryAcquireWhileHeld},
		{"ExpiryLetsNextIn", testExpiryLetsNextIn},
		{"ExtendKeepsLease", testExtendKeepsLease},
		{"LeaseConcurrentUse", testLeaseConcurrentUse},
		{"ReleaseIsIdempotent", testReleaseIsIdempotent},
		{"AcquireWaitEndsWithContext", testAcquireWaitEndsWithContext},
		{"AcquireWokenByRelease", testAcquireWokenByRelease},
		{"IndependentKeys", testIndependentKeys},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.run(t, newLocker(t))
		})
	}
}

// key returns a key no other test or run uses.
func key(t *testing.T, suffix string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "locktest:" + t.Name() + ":" + hex.EncodeToString(b[:]) + ":" + suffix
}

// ctx returns a context that ends with the test, and at the latest after
// patience.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), patience)
	t.Cleanup(cancel)
	return c
}

func mustAcquire(t *testing.T, l lock.Locker, k string, ttl time.Duration) lock.Lease {
	t.Helper()
	ls, err := l.Acquire(ctx(t), k, ttl)
	if err != nil {
		t.Fatalf("Acquire(%q): %v", k, err)
	}
	return ls
}

func mustTry(t *testing.T, l lock.Locker, k string, ttl time.Duration, want bool) lock.Lease {
	t.Helper()
	ls, ok, err := l.TryAcquire(ctx(t), k, ttl)
	if err != nil {
		t.Fatalf("TryAcquire(%q): %v", k, err)
	}
	if ok != want {
		t.Fatalf("TryAcquire(%q): ok = %v, want %v", k, ok, want)
	}
	if ok != (ls != nil) {
		t.Fatalf("TryAcquire(%q): ok = %v with lease %v", k, ok, ls)
	}
	return ls
}

// eventually polls try until it returns a lease, failing after patience.
func eventually(t *testing.T, l lock.Locker, k string, ttl time.Duration) lock.Lease {
	t.Helper()
	deadline := time.Now().Add(patience)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ls, ok, err := l.TryAcquire(ctx(t), k, ttl)
		if err != nil {
			t.Fatalf("TryAcquire(%q): %v", k, err)
		}
		if ok {
			return ls
		}
		if time.Now().After(deadline) {
			t.Fatalf("TryAcquire(%q) still refused after %s", k, patience)
		}
		<-tick.C
	}
}

func testAccessors(t *testing.T, l lock.Locker) {
	k := key(t, "k")
	before := time.Now()
	ls := mustAcquire(t, l, k, long)
	defer ls.Release(ctx(t))
	if ls.Key() != k {
		t.Errorf("Key() = %q, want %q", ls.Key(), k)
	}
	if ls.Token() == 0 {
		t.Error("Token() = 0")
	}
	// The backend's clock may differ from ours a little.
	if exp := ls.Expiry(); exp.Before(before.Add(long-5*time.Second)) || exp.After(time.Now().Add(long+5*time.Second)) {
		t.Errorf("Expiry() = %v, want about %v", exp, before.Add(long))
	}
}

func testInvalidArguments(t *testing.T, l lock.Locker) {
	tests := []struct {
		name string
		key  string
		ttl  time.Duration
	}{
		{"EmptyKey", "", long},
		{"ZeroTTL", key(t, "k"), 0},
		{"NegativeTTL", key(t, "k"), -time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if ls, err := l.Acquire(ctx(t), tt.key, tt.ttl); err == nil || errors.Is(err, lock.ErrTransient) {
				t.Errorf("Acquire: lease %v, error %v; want a non-transient error", ls, err)
			}
			if ls, ok, err := l.TryAcquire(ctx(t), tt.key, tt.ttl); err == nil || ok || errors.Is(err, lock.ErrTransient) {
				t.Errorf("TryAcquire: lease %v, ok %v, error %v; want a non-transient error", ls, ok, err)
			}
		})
	}
	t.Run("Extend", func(t *testing.T) {
		t.Parallel()
		ls := mustAcquire(t, l, key(t, "k"), long)
		defer ls.Release(ctx(t))
		if err := ls.Extend(ctx(t), 0); err == nil || errors.Is(err, lock.ErrLost) {
			t.Errorf("Extend(0) = %v, want a plain error", err)
		}
		if err := ls.Extend(ctx(t), long); err != nil {
			t.Errorf("Extend after a refused Extend: %v", err)
		}
	})
}

func testDoneContext(t *testing.T, l lock.Locker) {
	done, cancel := context.WithCancel(context.Background())
	cancel()
	k := key(t, "free")
	if ls, err := l.Acquire(done, k, long); !errors.Is(err, context.Canceled) {
		t.Errorf("Acquire with a done ctx: lease %v, error %v; want context.Canceled", ls, err)
	}
	if ls, ok, err := l.TryAcquire(done, k, long); !errors.Is(err, context.Canceled) || ok {
		t.Errorf("TryAcquire with a done ctx: lease %v, ok %v, error %v; want context.Canceled", ls, ok, err)
	}
	// Neither took the key.
	ls := mustTry(t, l, k, long, true)
	if err := ls.Extend(done, long); !errors.Is(err, context.Canceled) {
		t.Errorf("Extend with a done ctx = %v, want context.Canceled", err)
	}
	// Release works even with a done ctx.
	ls.Release(done)
	mustTry(t, l, k, long, true).Release(ctx(t))
}

// guarded is state that only a lock holder may touch. Each field is atomic so
// that the race detector stays quiet for backends whose happens-before it
// cannot see (a network round trip); overlap is detected by the checks.
type guarded struct {
	inside    atomic.Int32
	counter   atomic.Int64
	lastToken atomic.Uint64
	overlaps  atomic.Int64
	backwards atomic.Int64
}

// critical runs a deliberately non-atomic read-modify-write that loses
// updates, and counts overlaps, if two holders are ever inside at once.
func (g *guarded) critical(ls lock.Lease) {
	if g.inside.Add(1) != 1 {
		g.overlaps.Add(1)
	}
	if tok, last := ls.Token(), g.lastToken.Load(); tok <= last {
		g.backwards.Add(1)
	} else {
		g.lastToken.Store(tok)
	}
	v := g.counter.Load()
	runtime.Gosched()
	g.counter.Store(v + 1)
	g.inside.Add(-1)
}

func (g *guarded) check(t *testing.T, want int64) {
	t.Helper()
	if n := g.overlaps.Load(); n != 0 {
		t.Errorf("%d overlapping holders", n)
	}
	if n := g.backwards.Load(); n != 0 {
		t.Errorf("%d tokens not above the previous holder's", n)
	}
	if got := g.counter.Load(); got != want {
		t.Errorf("counter = %d, want %d (lost updates)", got, want)
	}
}

func testMutualExclusionHammer(t *testing.T, l lock.Locker) {
	const P, N = 8, 50
	k := key(t, "k")
	var g guarded
	var wg sync.WaitGroup
	for range P {
		wg.Go(func() {
			for range N {
				ls, err := l.Acquire(ctx(t), k, long)
				if err != nil {
					t.Errorf("Acquire: %v", err)
					return
				}
				g.critical(ls)
				ls.Release(ctx(t))
			}
		})
	}
	wg.Wait()
	g.check(t, P*N)
}

func testTryAcquireHammer(t *testing.T, l lock.Locker) {
	const P, N = 8, 50
	k := key(t, "k")
	var g guarded
	var wins atomic.Int64
	var wg sync.WaitGroup
	for range P {
		wg.Go(func() {
			for range N {
				ls, ok, err := l.TryAcquire(ctx(t), k, long)
				if err != nil {
					t.Errorf("TryAcquire: %v", err)
					return
				}
				if !ok {
					runtime.Gosched()
					continue
				}
				wins.Add(1)
				g.critical(ls)
				ls.Release(ctx(t))
			}
		})
	}
	wg.Wait()
	if wins.Load() == 0 {
		t.Fatal("no TryAcquire succeeded")
	}
	g.check(t, wins.Load())
}

func testTokensIncrease(t *testing.T, l lock.Locker) {
	k := key(t, "k")
	var last uint64
	next := func(how string, ls lock.Lease) {
		t.Helper()
		if ls.Token() <= last {
			t.Errorf("%s: token %d not above the previous %d", how, ls.Token(), last)
		}
		last = ls.Token()
	}
	for i := range 5 {
		ls := mustAcquire(t, l, k, long)
		next("Acquire", ls)
		ls.Release(ctx(t))
		ls = mustTry(t, l, k, long, true)
		next("TryAcquire", ls)
		ls.Release(ctx(t))
		if i == 0 {
			// Acquisitions of another key do not disturb the order.
			other := mustAcquire(t, l, key(t, "other"), long)
			other.Release(ctx(t))
		}
	}
	// A lease that expires, and the one that replaces it.
	ls := mustAcquire(t, l, k, short)
	next("Acquire", ls)
	next("after expiry", eventually(t, l, k, long))
}

func testTryAcquireWhileHeld(t *testing.T, l lock.Locker) {
	k := key(t, "k")
	ls := mustTry(t, l, k, long, true)
	mustTry(t, l, k, long, false)
	mustTry(t, l, k, long, false)
	ls.Release(ctx(t))
	// Release frees the key at once: no polling.
	next := mustTry(t, l, k, long, true)
	if next.Token() <= ls.Token() {
		t.Errorf("token %d after release not above %d", next.Token(), ls.Token())
	}
	next.Release(ctx(t))
}

func testExpiryLetsNextIn(t *testing.T, l lock.Locker) {
	k := key(t, "k")
	old := mustAcquire(t, l, k, short)
	next := eventually(t, l, k, long)
	if next.Token() <= old.Token() {
		t.Errorf("token %d after expiry not above %d", next.Token(), old.Token())
	}
	if err := old.Extend(ctx(t), long); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Extend of the expired lease = %v, want ErrLost", err)
	}
	// Releasing the expired lease neither fails nor frees the new holder's
	// key.
	old.Release(ctx(t))
	old.Release(ctx(t))
	mustTry(t, l, k, long, false)
	if err := next.Extend(ctx(t), long); err != nil {
		t.Errorf("Extend of the new holder's lease: %v", err)
	}
	next.Release(ctx(t))
	mustTry(t, l, k, long, true).Release(ctx(t))
}

func testExtendKeepsLease(t *testing.T, l lock.Locker) {
	k := key(t, "k")
	const ttl = time.Second
	ls := mustAcquire(t, l, k, ttl)
	first := ls.Expiry()
	if err := ls.Extend(ctx(t), long); err != nil {
		// Only a stall longer than ttl between the two calls excuses this.
		t.Fatalf("Extend right after Acquire: %v", err)
	}
	if !ls.Expiry().After(first) {
		t.Errorf("Expiry() = %v after Extend, want after %v", ls.Expiry(), first)
	}
	// Wait until the original TTL is over by our clock (plus slack for the
	// backend's), then check the lease is still held.
	timer := time.NewTimer(time.Until(first) + 200*time.Millisecond)
	select {
	case <-timer.C:
	case <-t.Context().Done():
		timer.Stop()
		return
	}
	mustTry(t, l, k, long, false)
	if err := ls.Extend(ctx(t), long); err != nil {
		t.Errorf("Extend past the original TTL: %v", err)
	}
	ls.Release(ctx(t))
	mustTry(t, l, k, long, true).Release(ctx(t))
}

func testLeaseConcurrentUse(t *testing.T, l lock.Locker) {
	const P, N = 4, 25
	k := key(t, "k")
	ls := mustAcquire(t, l, k, long)
	var wg sync.WaitGroup
	for range P {
		wg.Go(func() {
			for range N {
				if err := ls.Extend(ctx(t), long); err != nil {
					t.Errorf("Extend: %v", err)
					return
				}
				_ = ls.Expiry()
				_ = ls.Token()
			}
		})
	}
	wg.Wait()
	mustTry(t, l, k, long, false)
	// Concurrent releases: none fails, and the key is free after.
	for range P {
		wg.Go(func() { ls.Release(ctx(t)) })
	}
	wg.Wait()
	mustTry(t, l, k, long, true).Release(ctx(t))
}

func testReleaseIsIdempotent(t *testing.T, l lock.Locker) {
	k := key(t, "k")
	ls := mustAcquire(t, l, k, long)
	ls.Release(ctx(t))
	ls.Release(ctx(t))
	if err := ls.Extend(ctx(t), long); !errors.Is(err, lock.ErrLost) {
		t.Errorf("Extend after Release = %v, want ErrLost", err)
	}
	// The second Release did not free a later holder.
	next := mustTry(t, l, k, long, true)
	ls.Release(ctx(t))
	mustTry(t, l, k, long, false)
	next.Release(ctx(t))
}

func testAcquireWaitEndsWithContext(t *testing.T, l lock.Locker) {
	tests := []struct {
		name string
		ctx  func() (context.Context, context.CancelFunc)
		want error
	}{
		{"Deadline", func() (context.Context, context.CancelFunc) {
			return context.WithTimeout(t.Context(), 100*time.Millisecond)
		}, context.DeadlineExceeded},
		{"Cancel", func() (context.Context, context.CancelFunc) {
			c, cancel := context.WithCancel(t.Context())
			timer := time.AfterFunc(100*time.Millisecond, cancel)
			return c, func() { timer.Stop(); cancel() }
		}, context.Canceled},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			k := key(t, "k")
			holder := mustAcquire(t, l, k, long)
			defer holder.Release(ctx(t))
			c, cancel := tt.ctx()
			defer cancel()
			start := time.Now()
			ls, err := l.Acquire(c, k, long)
			if !errors.Is(err, tt.want) || ls != nil {
				t.Fatalf("Acquire of a held key: lease %v, error %v; want %v", ls, err, tt.want)
			}
			if d := time.Since(start); d > long/2 {
				t.Errorf("Acquire returned after %s, long after its ctx ended", d)
			}
			// The waiter took nothing: the holder still holds.
			if err := holder.Extend(ctx(t), long); err != nil {
				t.Errorf("holder's Extend: %v", err)
			}
		})
	}
}

func testAcquireWokenByRelease(t *testing.T, l lock.Locker) {
	k := key(t, "k")
	holder := mustAcquire(t, l, k, long)
	type result struct {
		ls  lock.Lease
		err error
		at  time.Time
	}
	started := make(chan struct{})
	got := make(chan result, 1)
	go func() {
		close(started)
		ls, err := l.Acquire(ctx(t), k, long)
		got <- result{ls, err, time.Now()}
	}()
	<-started
	// Give the waiter a moment to start waiting; if it has not, it finds
	// the key free, which the test also accepts.
	select {
	case r := <-got:
		t.Fatalf("Acquire of a held key returned: lease %v, error %v", r.ls, r.err)
	case <-time.After(50 * time.Millisecond):
	}
	released := time.Now()
	holder.Release(ctx(t))
	var r result
	select {
	case r = <-got:
	case <-time.After(patience):
		t.Fatalf("waiter not woken %s after the release", patience)
	}
	if r.err != nil {
		t.Fatalf("waiting Acquire: %v", r.err)
	}
	defer r.ls.Release(ctx(t))
	// Promptly: far sooner than the holder's TTL.
	if d := r.at.Sub(released); d > 5*time.Second {
		t.Errorf("waiter woke %s after the release", d)
	}
	if r.ls.Token() <= holder.Token() {
		t.Errorf("waiter's token %d not above the holder's %d", r.ls.Token(), holder.Token())
	}
}

func testIndependentKeys(t *testing.T, l lock.Locker) {
	a, b := key(t, "a"), key(t, "b")
	la := mustAcquire(t, l, a, long)
	defer la.Release(ctx(t))
	c, cancel := context.WithTimeout(t.Context(), patience)
	defer cancel()
	lb, err := l.Acquire(c, b, long)
	if err != nil {
		t.Fatalf("Acquire of another key while one is held: %v", err)
	}
	mustTry(t, l, a, long, false)
	mustTry(t, l, b, long, false)
	lb.Release(ctx(t))
	mustTry(t, l, b, long, true).Release(ctx(t))
	mustTry(t, l, a, long, false)
}
