package redislock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/locktest"
	"github.com/weftworks/weft/lock/redislock"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

// cluster starts n redis-servers.
func cluster(t *testing.T, n int) []*redistest.Server {
	t.Helper()
	ss := make([]*redistest.Server, n)
	for i := range ss {
		ss[i] = redistest.Start(t)
	}
	return ss
}

// clients returns one client per server, closed when t ends.
func clients(t *testing.T, ss []*redistest.Server) []redis.UniversalClient {
	t.Helper()
	cs := make([]redis.UniversalClient, len(ss))
	for i, s := range ss {
		cs[i] = s.Client(t)
	}
	return cs
}

// newLocker returns a Locker on ss through clients of its own (a "node"),
// with cfg's other fields.
func newLocker(t *testing.T, ss []*redistest.Server, cfg redislock.Config) lock.Locker {
	t.Helper()
	cfg.Clients = clients(t, ss)
	if cfg.Logger == nil {
		cfg.Logger = discard()
	}
	l, err := redislock.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return l
}

// ctx returns a context that ends with the test, and at the latest after
// 30s.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestConformance(t *testing.T) {
	t.Parallel()
	for _, n := range []int{1, 3} {
		t.Run(map[int]string{1: "OneServer", 3: "Quorum3"}[n], func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, n)
			locktest.Exercise(t, func(t *testing.T) lock.Locker {
				return newLocker(t, ss, redislock.Config{})
			})
		})
	}
}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never contacted
	t.Cleanup(func() { _ = c.Close() })
	tests := []struct {
		name string
		cfg  redislock.Config
		want string
	}{
		{"NoClients", redislock.Config{}, "Config.Clients must hold at least one client"},
		{"NilClient", redislock.Config{Clients: []redis.UniversalClient{c, nil}}, "Config.Clients[1] is nil"},
		{"BracePrefix", redislock.Config{Clients: []redis.UniversalClient{c}, Prefix: "weft:{x}:"}, `Config.Prefix "weft:{x}:"`},
		{"BadRetry", redislock.Config{Clients: []redis.UniversalClient{c}, Retry: lock.RetryPolicy{Multiplier: 0.5}}, "RetryPolicy.Multiplier"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := redislock.New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New = %v, %v; want an error saying %q", l, err, tt.want)
			}
		})
	}
}

func TestTTLBelowMinimum(t *testing.T) {
	t.Parallel()
	l := newLocker(t, cluster(t, 1), redislock.Config{})
	const ttl = 9 * time.Millisecond
	want := `redislock: ttl 9ms of "k" is below the 10ms minimum`
	if _, err := l.Acquire(ctx(t), "k", ttl); err == nil || err.Error() != want {
		t.Errorf("Acquire = %v, want %q", err, want)
	}
	if _, _, err := l.TryAcquire(ctx(t), "k", ttl); err == nil || err.Error() != want {
		t.Errorf("TryAcquire = %v, want %q", err, want)
	}
	ls, err := l.Acquire(ctx(t), "k", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer ls.Release(ctx(t))
	if err := ls.Extend(ctx(t), ttl); err == nil || err.Error() != want {
		t.Errorf("Extend = %v, want %q", err, want)
	}
}

func TestKeyLayout(t *testing.T) {
	t.Parallel()
	ss := cluster(t, 1)
	tests := []struct {
		name, prefix, key string
		mutex, fence      string
	}{
		{"Default", "", "workflow-instance:42", "weft:lock:{workflow-instance:42}", "weft:lock:{workflow-instance:42}:fence"},
		{"Prefix", "app1:", "workflow-definitions-refresh:all", "app1:lock:{workflow-definitions-refresh:all}", "app1:lock:{workflow-definitions-refresh:all}:fence"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l := newLocker(t, ss, redislock.Config{Prefix: tt.prefix})
			c := ss[0].Client(t)
			ls, err := l.Acquire(ctx(t), tt.key, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			fence, err := c.Get(ctx(t), tt.fence).Uint64()
			if err != nil || fence != ls.Token() {
				t.Errorf("GET %s = %d, %v; want the token %d", tt.fence, fence, err, ls.Token())
			}
			if pttl, err := c.PTTL(ctx(t), tt.mutex).Result(); err != nil || pttl <= 0 || pttl > time.Minute {
				t.Errorf("PTTL %s = %s, %v; want up to a minute", tt.mutex, pttl, err)
			}
			if pttl, err := c.PTTL(ctx(t), tt.fence).Result(); err != nil || pttl < time.Hour {
				t.Errorf("PTTL %s = %s, %v; want the counter's idle expiry", tt.fence, pttl, err)
			}
			ls.Release(ctx(t))
			if n, err := c.Exists(ctx(t), tt.mutex).Result(); err != nil || n != 0 {
				t.Errorf("EXISTS %s after release = %d, %v", tt.mutex, n, err)
			}
		})
	}
}

// clock is a fake clock, safe for concurrent use.
type clock struct {
	mu  sync.Mutex
	now time.Time
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

// TestExpiryByClock: Expiry follows the configured clock, and a lease past
// it is over even though Redis still holds the key.
func TestExpiryByClock(t *testing.T) {
	t.Parallel()
	ss := cluster(t, 1)
	clk := &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	l := newLocker(t, ss, redislock.Config{Now: clk.Now})
	const ttl = 10 * time.Second
	ls, err := l.Acquire(ctx(t), "k", ttl)
	if err != nil {
		t.Fatal(err)
	}
	// Redlock's allowance for drift: 1% of the ttl and 2ms.
	if want := clk.Now().Add(ttl - ttl/100 - 2*time.Millisecond); !ls.Expiry().Equal(want) {
		t.Errorf("Expiry() = %v, want %v", ls.Expiry(), want)
	}
	clk.Advance(time.Second)
	if err := ls.Extend(ctx(t), ttl); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if want := clk.Now().Add(ttl - ttl/100 - 2*time.Millisecond); !ls.Expiry().Equal(want) {
		t.Errorf("Expiry() after Extend = %v, want %v", ls.Expiry(), want)
	}
	clk.Advance(ttl)
	if err := ls.Extend(ctx(t), ttl); !errors.Is(err, lock.ErrLost) {
		t.Fatalf("Extend past Expiry = %v, want ErrLost", err)
	}
	// Redis still held it; Release frees it.
	if _, ok, err := l.TryAcquire(ctx(t), "k", ttl); ok || err != nil {
		t.Fatalf("TryAcquire before release: ok %v, error %v", ok, err)
	}
	ls.Release(ctx(t))
	next, ok, err := l.TryAcquire(ctx(t), "k", ttl)
	if !ok || err != nil {
		t.Fatalf("TryAcquire after release: ok %v, error %v", ok, err)
	}
	next.Release(ctx(t))
}

func TestReleaseLogs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		setup func(t *testing.T, s *redistest.Server, ls lock.Lease)
		want  string
	}{
		{"Unreachable", func(t *testing.T, s *redistest.Server, _ lock.Lease) { s.Stop(t) }, "lock release failed; the lease ends with its TTL"},
		{"Expired", func(t *testing.T, s *redistest.Server, ls lock.Lease) {
			if err := s.Client(t).Del(ctx(t), "weft:lock:{k}").Err(); err != nil {
				t.Fatal(err)
			}
		}, "lock lease lost before release"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ss := cluster(t, 1)
			var logs logtest.Buffer
			l := newLocker(t, ss, redislock.Config{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
			ls, err := l.Acquire(ctx(t), "k", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			tt.setup(t, ss[0], ls)
			done, cancel := context.WithCancel(t.Context())
			cancel()
			ls.Release(done) // must neither panic nor block
			ls.Release(done) // and log once
			got := logs.String()
			if strings.Count(got, tt.want) != 1 || !strings.Contains(got, "key=k") {
				t.Errorf("logs = %q, want one %q naming the key", got, tt.want)
			}
		})
	}
}
