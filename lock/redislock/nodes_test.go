package redislock_test

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/redislock"
)

var sizes = []struct {
	name    string
	servers int
}{
	{"OneServer", 1},
	{"Quorum3", 3},
}

// TestTwoNodesNeverBothHold hammers one key from two Lockers with clients
// of their own, as two hosts would, and counts the holders inside.
func TestTwoNodesNeverBothHold(t *testing.T) {
	t.Parallel()
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, sz.servers)
			nodes := []lock.Locker{newLocker(t, ss, redislock.Config{}), newLocker(t, ss, redislock.Config{})}
			const P, N = 4, 25 // goroutines per node, acquisitions per goroutine
			var (
				inside, overlaps, backwards atomic.Int64
				lastToken                   atomic.Uint64
				counter                     atomic.Int64
				perNode                     [2]atomic.Int64
				wg                          sync.WaitGroup
			)
			for n, l := range nodes {
				for range P {
					wg.Go(func() {
						for range N {
							ls, err := l.Acquire(ctx(t), "k", 10*time.Second)
							if err != nil {
								t.Errorf("node %d: Acquire: %v", n, err)
								return
							}
							if inside.Add(1) != 1 {
								overlaps.Add(1)
							}
							if tok := ls.Token(); tok <= lastToken.Load() {
								backwards.Add(1)
							} else {
								lastToken.Store(tok)
							}
							v := counter.Load() // a read-modify-write that loses updates under overlap
							runtime.Gosched()
							counter.Store(v + 1)
							perNode[n].Add(1)
							inside.Add(-1)
							ls.Release(ctx(t))
						}
					})
				}
			}
			wg.Wait()
			if n := overlaps.Load(); n != 0 {
				t.Errorf("%d times two holders were inside", n)
			}
			if n := backwards.Load(); n != 0 {
				t.Errorf("%d tokens not above the previous holder's", n)
			}
			if got, want := counter.Load(), int64(2*P*N); got != want {
				t.Errorf("counter = %d, want %d (lost updates)", got, want)
			}
			t.Logf("acquisitions per node: %d, %d", perNode[0].Load(), perNode[1].Load())
		})
	}
}

func TestAcquireEndsPromptlyWithContext(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		otherNode bool // the holder is another Locker, so the waiter polls
		ctx       func(parent context.Context) (context.Context, context.CancelFunc)
		want      error
	}{
		{"OtherNodeCancel", true, cancelAfter, context.Canceled},
		{"OtherNodeDeadline", true, deadlineAfter, context.DeadlineExceeded},
		{"SameNodeCancel", false, cancelAfter, context.Canceled},
		{"SameNodeDeadline", false, deadlineAfter, context.DeadlineExceeded},
	}
	ss := cluster(t, 1)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			waiter := newLocker(t, ss, redislock.Config{})
			holderLocker := waiter
			if tt.otherNode {
				holderLocker = newLocker(t, ss, redislock.Config{})
			}
			key := "k-" + tt.name
			holder, err := holderLocker.Acquire(ctx(t), key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			c, cancel := tt.ctx(t.Context())
			defer cancel()
			ls, err := waiter.Acquire(c, key, time.Minute)
			ended := time.Now()
			if !errors.Is(err, tt.want) || ls != nil {
				t.Fatalf("Acquire of a held key: lease %v, error %v; want %v", ls, err, tt.want)
			}
			<-c.Done() // already done: ctx.Err() is set only then
			if late := ended.Sub(contextEnd(c)); late > 2*time.Second {
				t.Errorf("Acquire returned %s after its ctx ended", late)
			}
			// The waiter left nothing behind: the holder still holds, and
			// after its release the key is free at once.
			if err := holder.Extend(ctx(t), time.Minute); err != nil {
				t.Fatalf("holder's Extend: %v", err)
			}
			holder.Release(ctx(t))
			next, ok, err := waiter.TryAcquire(ctx(t), key, time.Minute)
			if !ok || err != nil {
				t.Fatalf("TryAcquire after the holder's release: ok %v, error %v", ok, err)
			}
			next.Release(ctx(t))
		})
	}
}

// endAt records when cancelAfter and deadlineAfter end their contexts.
type endAt struct{}

func cancelAfter(parent context.Context) (context.Context, context.CancelFunc) {
	at := time.Now().Add(100 * time.Millisecond)
	c, cancel := context.WithCancel(context.WithValue(parent, endAt{}, at))
	timer := time.AfterFunc(time.Until(at), cancel)
	return c, func() { timer.Stop(); cancel() }
}

func deadlineAfter(parent context.Context) (context.Context, context.CancelFunc) {
	at := time.Now().Add(100 * time.Millisecond)
	return context.WithDeadline(context.WithValue(parent, endAt{}, at), at)
}

func contextEnd(c context.Context) time.Time { return c.Value(endAt{}).(time.Time) }

// TestExpiryHandsOver: a lease not extended past its ttl is lost, and a
// waiter on another node gets the key with a larger token.
func TestExpiryHandsOver(t *testing.T) {
	t.Parallel()
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, sz.servers)
			a, b := newLocker(t, ss, redislock.Config{}), newLocker(t, ss, redislock.Config{})
			const ttl = time.Second
			start := time.Now()
			old, err := a.Acquire(ctx(t), "k", ttl)
			if err != nil {
				t.Fatal(err)
			}
			next, err := b.Acquire(ctx(t), "k", time.Minute)
			if err != nil {
				t.Fatalf("waiting Acquire: %v", err)
			}
			if d := time.Since(start); d < ttl-ttl/10 {
				t.Errorf("the waiter got the key %s after it was taken for %s", d, ttl)
			}
			if next.Token() <= old.Token() {
				t.Errorf("token %d after expiry not above %d", next.Token(), old.Token())
			}
			if err := old.Extend(ctx(t), time.Minute); !errors.Is(err, lock.ErrLost) {
				t.Errorf("Extend of the expired lease = %v, want ErrLost", err)
			}
			old.Release(ctx(t))
			if _, ok, err := a.TryAcquire(ctx(t), "k", time.Minute); ok || err != nil {
				t.Errorf("TryAcquire after the old lease's release: ok %v, error %v; the new lease must hold", ok, err)
			}
			if err := next.Extend(ctx(t), time.Minute); err != nil {
				t.Errorf("Extend of the new lease: %v", err)
			}
			next.Release(ctx(t))
		})
	}
}

// TestExtendLostToAnotherHolder: the old holder's Extend is refused once
// the key changed hands, even with its own clock saying it is still valid.
func TestExtendLostToAnotherHolder(t *testing.T) {
	t.Parallel()
	for _, sz := range sizes {
		t.Run(sz.name, func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, sz.servers)
			frozen := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			a := newLocker(t, ss, redislock.Config{Now: func() time.Time { return frozen }})
			b := newLocker(t, ss, redislock.Config{})
			old, err := a.Acquire(ctx(t), "k", 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			next, err := b.Acquire(ctx(t), "k", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			defer next.Release(ctx(t))
			err = old.Extend(ctx(t), time.Minute)
			if !errors.Is(err, lock.ErrLost) {
				t.Fatalf("Extend after another holder took the key = %v, want ErrLost", err)
			}
			if !strings.Contains(err.Error(), `"k"`) {
				t.Errorf("error %q does not name the key", err)
			}
			if err := old.Extend(ctx(t), time.Minute); !errors.Is(err, lock.ErrLost) {
				t.Fatalf("second Extend = %v, want ErrLost (never revived)", err)
			}
		})
	}
}
