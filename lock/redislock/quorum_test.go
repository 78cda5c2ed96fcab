package redislock_test

import (
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/redislock"
)

// down is one way to take a server out: each must leave a quorum working.
var downs = []struct {
	name string
	down func(*redistest.Server, testing.TB)
}{
	{"Stopped", (*redistest.Server).Stop},
	{"Killed", (*redistest.Server).Kill},
	// A paused server accepts connections and never answers: calls to it
	// end only by their per-server timeout.
	{"Paused", (*redistest.Server).Pause},
}

func TestQuorumSurvivesOneServerDown(t *testing.T) {
	t.Parallel()
	for _, tt := range downs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, 3)
			l := newLocker(t, ss, redislock.Config{})
			other := newLocker(t, ss, redislock.Config{})
			const ttl = 10 * time.Second
			before, err := l.Acquire(ctx(t), "k", ttl)
			if err != nil {
				t.Fatal(err)
			}
			tt.down(ss[0], t)

			if err := before.Extend(ctx(t), ttl); err != nil {
				t.Fatalf("Extend with one server down: %v", err)
			}
			if _, ok, err := other.TryAcquire(ctx(t), "k", ttl); ok || err != nil {
				t.Fatalf("TryAcquire of the held key: ok %v, error %v; want false, nil", ok, err)
			}
			start := time.Now()
			before.Release(ctx(t))
			after, err := other.Acquire(ctx(t), "k", ttl)
			if err != nil {
				t.Fatalf("Acquire with one server down: %v", err)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("release and acquire took %s with one server down", d)
			}
			if after.Token() <= before.Token() {
				t.Errorf("token %d not above %d", after.Token(), before.Token())
			}
			if err := after.Extend(ctx(t), ttl); err != nil {
				t.Fatalf("Extend of the new lease: %v", err)
			}
			after.Release(ctx(t))
		})
	}
}

func TestQuorumLostIsTransient(t *testing.T) {
	t.Parallel()
	for _, tt := range downs {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, 3)
			policy := lock.RetryPolicy{MaxRetries: 2, InitialDelay: 20 * time.Millisecond, Jitter: -1}
			l := newLocker(t, ss, redislock.Config{Retry: policy})
			held, err := l.Acquire(ctx(t), "held", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tt.down(ss[0], t)
			tt.down(ss[1], t)

			// Two retries after 20ms and 40ms: at least 60ms, and far less
			// than a wait for a held key would be. A short ttl keeps the
			// per-server timeout short for the paused servers.
			const minWait = 60 * time.Millisecond
			const ttl = 2 * time.Second
			start := time.Now()
			ls, err := l.Acquire(ctx(t), "free", ttl)
			if !errors.Is(err, lock.ErrTransient) || ls != nil {
				t.Fatalf("Acquire with two of three servers down: lease %v, error %v; want ErrTransient", ls, err)
			}
			if d := time.Since(start); d < minWait || d > 10*time.Second {
				t.Errorf("Acquire failed after %s, want the retry policy's %s and a few calls", d, minWait)
			}
			start = time.Now()
			ls, ok, err := l.TryAcquire(ctx(t), "free", ttl)
			if !errors.Is(err, lock.ErrTransient) || ok || ls != nil {
				t.Fatalf("TryAcquire with two of three servers down: lease %v, ok %v, error %v; want ErrTransient", ls, ok, err)
			}
			if d := time.Since(start); d < minWait {
				t.Errorf("TryAcquire failed after %s, before the retry policy's %s", d, minWait)
			}
			if err := held.Extend(ctx(t), time.Minute); !errors.Is(err, lock.ErrTransient) {
				t.Errorf("Extend with two of three servers down = %v, want ErrTransient", err)
			}

			// Back to a quorum: the held lease is intact (the servers kept
			// it in their AOF, or never lost it) and new keys can be taken.
			for _, s := range ss[:2] {
				if tt.name == "Paused" {
					s.Resume(t)
				} else {
					s.Restart(t)
				}
			}
			// go-redis may repeat the last dial error for a second after
			// a server is back; only transient errors are excused. A paused
			// server may still apply the SET NX of an attempt that gave up
			// on it, which holds "free" there for its ttl: take another key.
			eventually(t, "Extend after the servers came back", func() error {
				return held.Extend(ctx(t), time.Minute)
			})
			eventually(t, "Acquire after the servers came back", func() error {
				ls, err := l.Acquire(ctx(t), "other", time.Minute)
				if err == nil {
					ls.Release(ctx(t))
				}
				return err
			})
			held.Release(ctx(t))
		})
	}
}

func TestTokensGrowAfterServerDataLoss(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		servers int
		disrupt func(t *testing.T, ss []*redistest.Server)
	}{
		// Counters gone: only the clock floor keeps tokens growing.
		{"FlushedOne", 1, func(t *testing.T, ss []*redistest.Server) {
			if err := ss[0].Client(t).FlushAll(ctx(t)).Err(); err != nil {
				t.Fatal(err)
			}
		}},
		{"KilledOne", 1, func(t *testing.T, ss []*redistest.Server) { ss[0].Kill(t); ss[0].Restart(t) }},
		{"RestartedInQuorum", 3, func(t *testing.T, ss []*redistest.Server) { ss[0].Kill(t); ss[0].Restart(t) }},
		{"FlushedMajority", 3, func(t *testing.T, ss []*redistest.Server) {
			for _, s := range ss[:2] {
				if err := s.Client(t).FlushAll(ctx(t)).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, tt.servers)
			l := newLocker(t, ss, redislock.Config{})
			var last uint64
			next := func(when string) {
				t.Helper()
				ls, err := l.Acquire(ctx(t), "k", time.Minute)
				if err != nil {
					t.Fatalf("Acquire %s: %v", when, err)
				}
				if ls.Token() <= last {
					t.Errorf("token %s = %d, not above %d", when, ls.Token(), last)
				}
				last = ls.Token()
				ls.Release(ctx(t))
			}
			for range 5 {
				next("before")
			}
			tt.disrupt(t, ss)
			for range 5 {
				next("after")
			}
		})
	}
}

// TestQuorumTokenReachesMajority is the case the second fencing round
// exists for: one server's counter far ahead of the others (from
// acquisitions that reached only it), then lost.
func TestQuorumTokenReachesMajority(t *testing.T) {
	t.Parallel()
	ss := cluster(t, 3)
	l := newLocker(t, ss, redislock.Config{})
	ahead := uint64(time.Now().Add(1000 * time.Hour).UnixMicro())
	if err := ss[0].Client(t).Set(ctx(t), "weft:lock:{k}:fence", ahead, 0).Err(); err != nil {
		t.Fatal(err)
	}
	a, err := l.Acquire(ctx(t), "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if a.Token() <= ahead {
		t.Fatalf("token %d not above the leading counter %d", a.Token(), ahead)
	}
	// Round 2 went on once a quorum answered: a majority carries the token.
	carry := 0
	for i, s := range ss {
		got, err := s.Client(t).Get(ctx(t), "weft:lock:{k}:fence").Uint64()
		if err != nil {
			t.Fatalf("server %d: %v", i, err)
		}
		if got >= a.Token() {
			carry++
		}
	}
	if carry < 2 {
		t.Errorf("%d servers carry the token %d, want a majority", carry, a.Token())
	}
	a.Release(ctx(t))
	ss[0].Stop(t)
	b, err := l.Acquire(ctx(t), "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if b.Token() <= a.Token() {
		t.Errorf("token %d from the other two servers not above %d", b.Token(), a.Token())
	}
	b.Release(ctx(t))
}

func TestFenceCounterIsReadAsAnInteger(t *testing.T) {
	t.Parallel()
	ss := cluster(t, 1)
	l := newLocker(t, ss, redislock.Config{})
	// A counter past 2^53 would lose precision in Lua; one just below it
	// must come back exact.
	const big = 1<<53 - 10
	if err := ss[0].Client(t).Set(ctx(t), "weft:lock:{k}:fence", strconv.Itoa(big), 0).Err(); err != nil {
		t.Fatal(err)
	}
	ls, err := l.Acquire(ctx(t), "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx(t))
	if ls.Token() != big+1 {
		t.Errorf("token %d, want %d", ls.Token(), big+1)
	}
	if got, err := ss[0].Client(t).Get(ctx(t), "weft:lock:{k}:fence").Result(); err != nil || got != strconv.Itoa(big+1) {
		t.Errorf("counter %q, %v; want %d", got, err, big+1)
	}
}

// eventually calls op until it succeeds, failing the test when it returns
// an error that is not transient or is still failing after 10s.
func eventually(t *testing.T, what string, op func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		err := op()
		if err == nil {
			return
		}
		if !errors.Is(err, lock.ErrTransient) || time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		<-tick.C
	}
}
