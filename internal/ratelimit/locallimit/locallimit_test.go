package locallimit_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/ratelimit/locallimit"
	"github.com/weftworks/weft/internal/ratelimit/ratelimittest"
)

// epoch is the fake clocks' start.
var epoch = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

// TestConformance runs the suite on a frozen fake clock, where every wait
// must be the model's exactly, and on the real clock.
func TestConformance(t *testing.T) {
	t.Parallel()
	share := func(_ *testing.T, l ratelimittest.Limiter) ratelimittest.Limiter { return l }
	t.Run("fake-clock", func(t *testing.T) {
		t.Parallel()
		frozen := func() time.Time { return epoch }
		ratelimittest.Exercise(t, ratelimittest.Config{
			New:    func(*testing.T) ratelimittest.Limiter { return locallimit.New(locallimit.Config{Now: frozen}) },
			Share:  share,
			Now:    frozen,
			Frozen: true,
		})
	})
	t.Run("real-clock", func(t *testing.T) {
		t.Parallel()
		ratelimittest.Exercise(t, ratelimittest.Config{
			New:   func(*testing.T) ratelimittest.Limiter { return locallimit.New(locallimit.Config{}) },
			Share: share,
		})
	})
}

// clock is a fake clock that a test moves.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// TestClock: the limiter decides by its clock — a key refills as the
// clock moves on, a clock set back grants nothing, and a clock set
// forward makes the key idle.
func TestClock(t *testing.T) {
	t.Parallel()
	c := &clock{now: epoch}
	l := locallimit.New(locallimit.Config{Now: c.Now})
	lim := ratelimit.Limit{Count: 1, Per: time.Second, Burst: 2}
	steps := []struct {
		move    time.Duration
		maxWait time.Duration
		ok      bool
		wait    time.Duration
	}{
		{ok: true},
		{ok: true},
		{wait: time.Second},
		{move: 500 * time.Millisecond, wait: 500 * time.Millisecond},
		{move: 500 * time.Millisecond, ok: true},
		{wait: time.Second},
		{move: -5 * time.Second, wait: 6 * time.Second},
		{maxWait: time.Minute, ok: true, wait: 6 * time.Second},
		{move: 5 * time.Second, wait: 2 * time.Second},
		{move: time.Hour, ok: true},
		{ok: true},
		{wait: time.Second},
	}
	for i, s := range steps {
		c.Add(s.move)
		wait, ok, err := l.Reserve(context.Background(), "k", lim, s.maxWait)
		if err != nil || ok != s.ok || wait != s.wait {
			t.Fatalf("step %d (%+v): ok=%v wait=%s err=%v", i, s, ok, wait, err)
		}
	}
}

// TestForgetsIdleKeys: a key whose TAT has passed carries no state, and
// the limiter's map stays within twice the keys in use (or its minimum
// sweep size), however many keys come and go.
func TestForgetsIdleKeys(t *testing.T) {
	t.Parallel()
	c := &clock{now: epoch}
	l := locallimit.New(locallimit.Config{Now: c.Now})
	lim := ratelimit.Limit{Count: 1, Per: time.Second}
	const perRound = 1500
	most := 0
	for round := range 40 {
		for i := range perRound {
			key := fmt.Sprintf("r%d-%d", round, i)
			if _, ok, err := l.Reserve(context.Background(), key, lim, 0); !ok || err != nil {
				t.Fatalf("round %d, key %s: a new key refused (err %v)", round, key, err)
			}
			most = max(most, l.Keys())
		}
		// Every key of this round is idle a second later.
		c.Add(time.Second)
	}
	if limit := 2 * perRound; most > limit {
		t.Errorf("the limiter held up to %d keys, want at most %d (twice the %d keys in use)", most, limit, perRound)
	}
	// A forgotten key is as new: its burst is whole.
	if wait, ok, err := l.Reserve(context.Background(), "r0-0", lim, 0); !ok || wait != 0 || err != nil {
		t.Errorf("a forgotten key: ok=%v wait=%s err=%v, want granted at once", ok, wait, err)
	}
}

// TestStatesOfIdleKeys: States lists a key while its TAT is ahead of the
// limiter's clock, and not once it has passed, though the limiter holds
// the key until its next sweep; a later reservation lists it again.
func TestStatesOfIdleKeys(t *testing.T) {
	t.Parallel()
	c := &clock{now: epoch}
	l := locallimit.New(locallimit.Config{Now: c.Now})
	lim := ratelimit.Limit{Count: 1, Per: time.Second, Burst: 3}
	list := func() []string {
		t.Helper()
		states, now, truncated, err := l.States(context.Background(), "", 0)
		if err != nil || truncated || !now.Equal(c.Now()) {
			t.Fatalf("States: truncated %v, now %s, err %v; want the clock's now %s", truncated, now, err, c.Now())
		}
		var keys []string
		for _, s := range states {
			keys = append(keys, s.Key)
		}
		return keys
	}
	for range 2 {
		if _, ok, err := l.Reserve(context.Background(), "k", lim, 0); !ok || err != nil {
			t.Fatalf("Reserve: ok=%v err=%v", ok, err)
		}
	}
	steps := []struct {
		move time.Duration
		want []string
	}{
		{want: []string{"k"}},
		{move: 1999 * time.Millisecond, want: []string{"k"}},
		{move: time.Millisecond}, // the TAT, 2s
		{move: time.Hour},
	}
	for i, s := range steps {
		c.Add(s.move)
		if got := list(); !slices.Equal(got, s.want) {
			t.Fatalf("step %d, at %s: States lists %q, want %q", i, c.Now().Sub(epoch), got, s.want)
		}
	}
	if l.Keys() != 1 {
		t.Fatalf("the limiter holds %d keys, want the idle one until its sweep", l.Keys())
	}
	if _, ok, err := l.Reserve(context.Background(), "k", lim, 0); !ok || err != nil {
		t.Fatalf("Reserve: ok=%v err=%v", ok, err)
	}
	if got := list(); !slices.Equal(got, []string{"k"}) {
		t.Fatalf("after a new reservation: States lists %q, want [k]", got)
	}
}

// TestHammer has many goroutines reserve on a few keys with a real clock
// (under -race): every key's grants stay within its burst plus one per
// interval of the time the calls took.
func TestHammer(t *testing.T) {
	t.Parallel()
	l := locallimit.New(locallimit.Config{})
	lim := ratelimit.Limit{Count: 1000, Per: time.Second, Burst: 10}
	const goroutines, loops, keys = 16, 500, 4
	var granted [keys]int64
	var mu sync.Mutex
	start := time.Now()
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for n := range loops {
				k := (g + n) % keys
				_, ok, err := l.Reserve(context.Background(), fmt.Sprint("key-", k), lim, 0)
				if err != nil {
					t.Error(err)
					return
				}
				if ok {
					mu.Lock()
					granted[k]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	allowed := int64(lim.EffectiveBurst()) + int64(elapsed/lim.Interval()) + 1
	for k, n := range granted {
		if n < 1 || n > allowed {
			t.Errorf("key %d: %d events granted in %s, want 1 to %d", k, n, elapsed, allowed)
		}
	}
}
