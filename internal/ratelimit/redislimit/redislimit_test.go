package redislimit_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/ratelimit/ratelimittest"
	"github.com/weftworks/weft/internal/ratelimit/redislimit"
	"github.com/weftworks/weft/internal/redistest"
)

// node is a limiter with the prefix it was made with, so that the suite's
// Share can make another node on the same keys.
type node struct {
	*redislimit.Limiter
	prefix string
}

// suite returns the conformance suite's Config for limiters on clients
// that newClient makes: each New gets a prefix of its own on one client,
// and each Share another client (another node) on the same prefix.
func suite(t *testing.T, newClient func(t *testing.T) redis.UniversalClient) ratelimittest.Config {
	first := newClient(t)
	var n atomic.Int64
	newNode := func(t *testing.T, c redis.UniversalClient, prefix string) *node {
		l, err := redislimit.New(redislimit.Config{Client: c, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		return &node{Limiter: l, prefix: prefix}
	}
	return ratelimittest.Config{
		New: func(t *testing.T) ratelimittest.Limiter {
			return newNode(t, first, fmt.Sprintf("suite-%d:", n.Add(1)))
		},
		Share: func(t *testing.T, l ratelimittest.Limiter) ratelimittest.Limiter {
			return newNode(t, newClient(t), l.(*node).prefix)
		},
		Now: time.Now,
		// Redis's TIME counts microseconds.
		Slack: time.Millisecond,
	}
}

// TestConformance runs the suite on a redis-server and on a one-node
// Redis Cluster, through go-redis's plain and cluster clients.
func TestConformance(t *testing.T) {
	t.Parallel()
	t.Run("server", func(t *testing.T) {
		t.Parallel()
		s := redistest.Start(t)
		ratelimittest.Exercise(t, suite(t, func(t *testing.T) redis.UniversalClient { return s.Client(t) }))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		s := redistest.StartCluster(t)
		ratelimittest.Exercise(t, suite(t, func(t *testing.T) redis.UniversalClient { return s.ClusterClient(t) }))
	})
}

// TestConformanceOnCluster runs the suite on a Redis Cluster of three
// masters with a replica each, through a cluster client per node: each
// key is its own hash tag, on whichever master serves its slot.
func TestConformanceOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterOf(t, 3, 1)
	ratelimittest.Exercise(t, suite(t, func(t *testing.T) redis.UniversalClient { return c.Client(t) }))
}

// ctx bounds a test's Redis calls.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

// TestKeyLayout: a key's state is its TAT in decimal Unix nanoseconds
// and the terms of its last granted event, under the prefix with the key
// as its hash tag, expiring when the TAT passes; a refusal writes
// nothing.
func TestKeyLayout(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	l, err := redislimit.New(redislimit.Config{Client: c, Prefix: "layout:"})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := l.Key("partner"), "layout:rate:{partner}"; got != want {
		t.Fatalf("Key(partner) = %q, want %q", got, want)
	}
	lim := ratelimit.Limit{Count: 1, Per: time.Minute, Burst: 2}
	before := time.Now()
	for range 2 {
		if _, ok, err := l.Reserve(ctx(t), "partner", lim, 0); !ok || err != nil {
			t.Fatalf("the burst: ok=%v err=%v", ok, err)
		}
	}
	after := time.Now()
	read := func() (time.Time, time.Duration) {
		t.Helper()
		v, err := c.Get(ctx(t), l.Key("partner")).Result()
		if err != nil {
			t.Fatalf("GET %s: %v", l.Key("partner"), err)
		}
		digits, terms, _ := strings.Cut(v, " ")
		if want := "1 60000000000 2"; terms != want {
			t.Fatalf("GET %s = %q: terms %q, want %q (count, per in ns, burst)", l.Key("partner"), v, terms, want)
		}
		ns, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			t.Fatalf("GET %s = %q: not Unix nanoseconds: %v", l.Key("partner"), v, err)
		}
		ttl, err := c.PTTL(ctx(t), l.Key("partner")).Result()
		if err != nil {
			t.Fatal(err)
		}
		return time.Unix(0, ns), ttl
	}
	tat, ttl := read()
	// Two events from idle: the TAT is two minutes after the first call.
	if lo, hi := before.Add(2*time.Minute-time.Millisecond), after.Add(2*time.Minute); tat.Before(lo) || tat.After(hi) {
		t.Errorf("TAT %s, want between %s and %s", tat, lo, hi)
	}
	if ttl <= 2*time.Minute-time.Since(before)-time.Second || ttl > 2*time.Minute {
		t.Errorf("PTTL %s, want the time left until the TAT, about 2m", ttl)
	}
	// A refusal changes neither the TAT, nor the terms, nor the expiry.
	if _, ok, err := l.Reserve(ctx(t), "partner", ratelimit.Limit{Count: 7, Per: time.Second}, time.Second); ok || err != nil {
		t.Fatalf("beyond the burst: ok=%v err=%v, want a refusal", ok, err)
	}
	tat2, ttl2 := read()
	if !tat2.Equal(tat) || ttl2 > ttl {
		t.Errorf("after a refusal: TAT %s (was %s), PTTL %s (was %s)", tat2, tat, ttl2, ttl)
	}
	// An idle key vanishes: at 1000/s, a TAT a millisecond ahead.
	fast := ratelimit.Limit{Count: 1000, Per: time.Second}
	if _, ok, err := l.Reserve(ctx(t), "fast", fast, 0); !ok || err != nil {
		t.Fatalf("fast: ok=%v err=%v", ok, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := c.Exists(ctx(t), l.Key("fast")).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists 10s after its TAT", l.Key("fast"))
		}
		time.Sleep(5 * time.Millisecond) // polling Redis's expiry
	}
}

// TestClusterSpreadsKeys: on a Redis Cluster each key hashes by its own
// name (its hash tag), not by the prefix, so keys spread over the slots.
func TestClusterSpreadsKeys(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t).ClusterClient(t)
	l, err := redislimit.New(redislimit.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	lim := ratelimit.Limit{Count: 10, Per: time.Second}
	slots := map[int64]bool{}
	for _, k := range []string{"a", "b", "c", "partner", "customer-42", "x:y"} {
		if _, ok, err := l.Reserve(ctx(t), k, lim, 0); !ok || err != nil {
			t.Fatalf("key %q: ok=%v err=%v", k, ok, err)
		}
		got, err := c.ClusterKeySlot(ctx(t), l.Key(k)).Result()
		if err != nil {
			t.Fatal(err)
		}
		want, err := c.ClusterKeySlot(ctx(t), k).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s is in slot %d, want %d (the slot of %q)", l.Key(k), got, want, k)
		}
		if !strings.HasPrefix(l.Key(k), "weft:rate:{") {
			t.Errorf("Key(%q) = %q, want it under weft:rate:", k, l.Key(k))
		}
		slots[got] = true
	}
	if len(slots) < 4 {
		t.Errorf("6 keys in %d slots: they do not spread", len(slots))
	}
}

// TestScriptReloaded: a server that lost its scripts (a restart, SCRIPT
// FLUSH) gets the script again with EVAL.
func TestScriptReloaded(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	l, err := redislimit.New(redislimit.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	lim := ratelimit.Limit{Count: 1, Per: time.Minute, Burst: 3}
	for i := range 3 {
		if err := c.ScriptFlush(ctx(t)).Err(); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := l.Reserve(ctx(t), "k", lim, 0); !ok || err != nil {
			t.Fatalf("call %d after SCRIPT FLUSH: ok=%v err=%v", i, ok, err)
		}
	}
}

// TestErrors: a bad Config names its field; a key whose value is not a
// TAT, and a server that is down, are errors that name the key and the
// address.
func TestErrors(t *testing.T) {
	t.Parallel()
	if _, err := redislimit.New(redislimit.Config{}); err == nil || !strings.Contains(err.Error(), "Config.Client") {
		t.Errorf("New without a client: %v, want an error naming Config.Client", err)
	}
	s := redistest.Start(t)
	c := s.Client(t)
	if _, err := redislimit.New(redislimit.Config{Client: c, Prefix: "{weft}:"}); err == nil || !strings.Contains(err.Error(), "Config.Prefix") {
		t.Errorf("New with braces in the prefix: %v, want an error naming Config.Prefix", err)
	}
	l, err := redislimit.New(redislimit.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	lim := ratelimit.Limit{Count: 1, Per: time.Second}
	if err := c.Set(ctx(t), l.Key("bad"), "not a time", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, ok, err := l.Reserve(ctx(t), "bad", lim, time.Second)
	if ok || err == nil || !strings.Contains(err.Error(), `"bad"`) || !strings.Contains(err.Error(), s.Addr()) {
		t.Errorf("a key holding %q: ok=%v err=%v, want an error naming the key and %s", "not a time", ok, err, s.Addr())
	}
	if v, _ := c.Get(ctx(t), l.Key("bad")).Result(); v != "not a time" {
		t.Errorf("the refused call wrote %q", v)
	}
	s.Stop(t)
	_, ok, err = l.Reserve(ctx(t), "k", lim, time.Second)
	if ok || err == nil || !strings.Contains(err.Error(), s.Addr()) {
		t.Errorf("with the server down: ok=%v err=%v, want an error naming %s", ok, err, s.Addr())
	}
}
