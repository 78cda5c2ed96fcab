// Package ratelimittest is the conformance suite every rate limiter by key
// runs (internal/ratelimit/locallimit, internal/ratelimit/redislimit):
// Exercise states the contract of Reserve and States as tests, with the
// GCRA of package ratelimit as the model.
//
//	frozen := func() time.Time { return epoch }
//	ratelimittest.Exercise(t, ratelimittest.Config{
//		New:    func(*testing.T) ratelimittest.Limiter { return locallimit.New(locallimit.Config{Now: frozen}) },
//		Share:  func(_ *testing.T, l ratelimittest.Limiter) ratelimittest.Limiter { return l },
//		Now:    frozen,
//		Frozen: true,
//	})
//
// # Fake and real clocks
//
// The suite never waits for time to pass: it asks for events with long
// enough maximum waits and compares the waits it is given. A scenario's
// expected waits are those of the model when every call happens at one
// instant. On a fake clock that the suite never moves, that is what
// happens, and the waits must be exact. A limiter on real time (Redis's
// TIME, on this machine) sees time pass between the calls: the suite reads
// Config.Now before and after each call, and since the GCRA's event times
// only move later when calls happen later (and all move together when all
// calls do), each wait is held between what the model allows for the
// first and the last instant the calls could have happened. The
// scenarios leave seconds between a wait and the maximum wait that
// decides it, so a loaded machine that stalls a call for a while changes
// no decision, only the width of the bounds. A key that becomes idle needs
// time to pass: the suite checks it on real clocks only (Config.Frozen).
package ratelimittest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
)

// Limiter is what the suite exercises: the Reserve that the limiters'
// consumers declare (plugins.RateLimiter for a grant's host rules), and
// the States that shows their keys to an operator.
type Limiter interface {
	// Reserve takes the next event of key under l if it may happen within
	// maxWait from now, and says how long to wait for it (0: at once).
	// When the wait would be longer, it takes nothing (the key's state is
	// unchanged) and returns ok false with the wait it would have had.
	Reserve(ctx context.Context, key string, l ratelimit.Limit, maxWait time.Duration) (wait time.Duration, ok bool, err error)

	// States returns the keys whose TAT is ahead of the limiter's now,
	// starting with prefix (all when empty), sorted by key, at most max
	// of them (max ≤ 0: 1000) and whether there were more; and the
	// limiter's now, against which ratelimit.KeyState.Backlog is read.
	States(ctx context.Context, prefix string, max int) (states []ratelimit.KeyState, now time.Time, truncated bool, err error)
}

// Config says how to make the limiters under test and read their clock.
type Config struct {
	// New returns a limiter whose keys are all idle: a new one, or one on
	// state that no other call of New shares (a fresh key prefix).
	// Required.
	New func(t *testing.T) Limiter

	// Share returns another limiter on the same state as l, as another
	// node of a cluster would be: what one takes, the other sees. A
	// limiter of one process returns l itself. Required.
	Share func(t *testing.T, l Limiter) Limiter

	// Now reads the limiters' clock: the fake clock they read, which the
	// suite never moves, or time.Now for limiters on real time on this
	// machine. Defaults to time.Now.
	Now func() time.Time

	// Slack is how far the limiters' clock may be from Now's readings:
	// 0 for the fake clock itself; Redis's TIME counts whole microseconds.
	// Defaults to 0.
	Slack time.Duration

	// Frozen says that Now is a fake clock that never moves: the suite
	// then skips what needs time to pass (a key whose TAT passes is no
	// longer listed), which the limiter's own tests check with a clock
	// they move. Defaults to false.
	Frozen bool
}

// Exercise runs the suite. Each subtest calls New for limiters of its own
// and runs in parallel with the others.
func Exercise(t *testing.T, cfg Config) {
	t.Helper()
	if cfg.New == nil || cfg.Share == nil {
		t.Fatal("ratelimittest: Config.New and Config.Share are required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	for _, s := range scenarios {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			runScenario(t, cfg, s)
		})
	}
	t.Run("ConcurrentReserversGetDistinctSlots", func(t *testing.T) {
		t.Parallel()
		concurrent(t, cfg)
	})
	t.Run("States", func(t *testing.T) {
		t.Parallel()
		states(t, cfg)
	})
	t.Run("IdleKeysAreNotListed", func(t *testing.T) {
		t.Parallel()
		if cfg.Frozen {
			t.Skip("a frozen clock: no key becomes idle")
		}
		idleKeys(t, cfg)
	})
	t.Run("DoneContext", func(t *testing.T) {
		t.Parallel()
		doneContext(t, cfg)
	})
	t.Run("InvalidLimit", func(t *testing.T) {
		t.Parallel()
		invalidLimit(t, cfg)
	})
}

// step is one call of a scenario, and what the model says of it when
// every call happens at one instant.
type step struct {
	key     string
	l       ratelimit.Limit
	maxWait time.Duration
	ok      bool
	wait    time.Duration
	share   bool // call through the shared limiter (another node)
}

type scenario struct {
	name  string
	steps []step
}

// The limits of the scenarios: intervals of seconds, so that the time a
// loaded machine takes between calls is small beside them.
var (
	tenSeconds = ratelimit.Limit{Count: 6, Per: time.Minute, Burst: 3} // I = 10s, B = 3
	oneMinute  = ratelimit.Limit{Count: 1, Per: time.Minute}           // I = 1m, B = 1
	twoAtOnce  = ratelimit.Limit{Count: 1, Per: 10 * time.Second, Burst: 2}
)

func repeat(n int, s step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

var scenarios = []scenario{
	{
		// After a quiet period, Burst events go at once; then one every
		// interval, each reservation one interval after the last.
		name: "BurstThenRate",
		steps: slices.Concat(
			repeat(3, step{l: tenSeconds, ok: true}),
			[]step{
				{l: tenSeconds, wait: 10 * time.Second},
				{l: tenSeconds, maxWait: time.Minute, ok: true, wait: 10 * time.Second},
				{l: tenSeconds, maxWait: time.Minute, ok: true, wait: 20 * time.Second, share: true},
				{l: tenSeconds, maxWait: time.Minute, ok: true, wait: 30 * time.Second},
				{l: tenSeconds, maxWait: 35 * time.Second, wait: 40 * time.Second},
				// A negative maxWait is read as 0.
				{l: tenSeconds, maxWait: -time.Hour, wait: 40 * time.Second},
			},
		),
	},
	{
		// Refusals take nothing: after any number of them, on any node,
		// the next slot is the one after the last granted.
		name: "RefusalTakesNothing",
		steps: slices.Concat(
			[]step{{l: oneMinute, ok: true}},
			repeat(10, step{l: oneMinute, maxWait: 30 * time.Second, wait: time.Minute}),
			repeat(10, step{l: oneMinute, maxWait: 30 * time.Second, wait: time.Minute, share: true}),
			[]step{
				{l: oneMinute, maxWait: 2 * time.Minute, ok: true, wait: time.Minute},
				{l: oneMinute, maxWait: 90 * time.Second, wait: 2 * time.Minute, share: true},
				{l: oneMinute, maxWait: 2 * time.Minute, ok: true, wait: 2 * time.Minute, share: true},
			},
		),
	},
	{
		// Keys are independent, whatever their bytes: one key's events
		// leave every other key's burst whole.
		name: "KeysAreIndependent",
		steps: func() []step {
			var steps []step
			keys := []string{"a", "b", "", "a{b}", "{a}", "}{", "a:b", "ключ", "a b", strings.Repeat("k", 256)}
			for round, want := range []step{{ok: true}, {ok: true}, {wait: 10 * time.Second}} {
				for i, k := range keys {
					want.key, want.l, want.share = k, twoAtOnce, (i+round)%2 == 1
					steps = append(steps, want)
				}
			}
			return steps
		}(),
	},
	{
		// The Limit is an argument of every call: a changed one applies
		// from the next call, from where the key's TAT stands.
		name: "ChangedLimitApplies",
		steps: slices.Concat(
			repeat(3, step{l: tenSeconds, ok: true}),
			[]step{
				// Slower, burst 1: one minute after the TAT (30s), less
				// no burst.
				{l: oneMinute, maxWait: 2 * time.Minute, ok: true, wait: 30 * time.Second},
				{l: oneMinute, maxWait: 2 * time.Minute, ok: true, wait: 90 * time.Second, share: true},
				{l: oneMinute, maxWait: time.Minute, wait: 150 * time.Second},
				// Back to 10s, burst 3: ten seconds after the TAT (150s),
				// less three intervals of burst.
				{l: tenSeconds, maxWait: 3 * time.Minute, ok: true, wait: 130 * time.Second},
				// A burst of 100 covers the whole TAT: at once.
				{l: ratelimit.Limit{Count: 6, Per: time.Minute, Burst: 100}, ok: true},
			},
		),
	},
}

// call is one observed call: the readings of the clock around it.
type call struct {
	before, after time.Time
	wait          time.Duration
	ok            bool
}

// reserve calls lim and reads the clock around the call.
func reserve(t *testing.T, cfg Config, lim Limiter, key string, l ratelimit.Limit, maxWait time.Duration) call {
	t.Helper()
	before := cfg.Now()
	wait, ok, err := lim.Reserve(context.Background(), key, l, maxWait)
	after := cfg.Now()
	if err != nil {
		t.Fatalf("Reserve(%q, %s, max wait %s): %v", key, l, maxWait, err)
	}
	if wait < 0 {
		t.Fatalf("Reserve(%q, %s, max wait %s): negative wait %s", key, l, maxWait, wait)
	}
	if ok && wait > max(maxWait, 0) {
		t.Fatalf("Reserve(%q, %s, max wait %s): granted with a wait of %s", key, l, maxWait, wait)
	}
	return call{before: before, after: after, wait: wait, ok: ok}
}

// runScenario runs the steps in order and checks each against the model:
// the decision exactly, and the wait within what time passing allows.
func runScenario(t *testing.T, cfg Config, s scenario) {
	lim := cfg.New(t)
	shared := cfg.Share(t, lim)
	t0 := cfg.Now()
	for i, st := range s.steps {
		on := lim
		if st.share {
			on = shared
		}
		c := reserve(t, cfg, on, st.key, st.l, st.maxWait)
		if c.ok != st.ok {
			t.Fatalf("step %d (key %q, %s, max wait %s): ok=%v wait=%s, want ok=%v wait=%s",
				i, st.key, st.l, st.maxWait, c.ok, c.wait, st.ok, st.wait)
		}
		// The model's event is at t0+st.wait if every call happened at
		// t0, and at c.after+st.wait if every call happened at c.after;
		// the calls happened in between, and the event observed lies in
		// [c.before, c.after] + c.wait.
		lo := max(st.wait-c.after.Sub(t0)-cfg.Slack, 0)
		hi := st.wait + c.after.Sub(c.before) + cfg.Slack
		if c.wait < lo || c.wait > hi {
			t.Fatalf("step %d (key %q, %s, max wait %s): wait %s, want %s (between %s and %s as the clock went)",
				i, st.key, st.l, st.maxWait, c.wait, st.wait, lo, hi)
		}
	}
}

// concurrent has goroutines on three limiters sharing one state (three
// nodes) reserve events of one key at once: every reservation is granted,
// the events are those of the model (B at once, then one every interval,
// none twice), and no B+1 of them fall within less than an interval.
func concurrent(t *testing.T, cfg Config) {
	const goroutines, each = 24, 8
	l := ratelimit.Limit{Count: 1, Per: time.Second, Burst: 4} // I = 1s: far beyond a call's duration
	first := cfg.New(t)
	lims := []Limiter{first, cfg.Share(t, first), cfg.Share(t, first)}
	calls := make([]call, goroutines*each)
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make(chan error, goroutines)
	t0 := cfg.Now()
	for g := range goroutines {
		wg.Go(func() {
			<-start
			for n := range each {
				before := cfg.Now()
				wait, ok, err := lims[g%len(lims)].Reserve(context.Background(), "one-key", l, time.Hour)
				after := cfg.Now()
				if err != nil || !ok {
					errs <- fmt.Errorf("goroutine %d, call %d: ok=%v wait=%s err=%v", g, n, ok, wait, err)
					return
				}
				calls[g*each+n] = call{before: before, after: after, wait: wait, ok: ok}
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	last := t0
	for _, c := range calls {
		if c.after.After(last) {
			last = c.after
		}
	}
	// Each event lies in [before, after] + wait. The model, every call at
	// one instant, gives the waits 0 (B times), I, 2I, …; the k-th earliest
	// event is then no earlier than t0 plus the k-th wait, and no later than
	// the last reading plus it.
	los := make([]time.Time, len(calls))
	his := make([]time.Time, len(calls))
	for i, c := range calls {
		los[i], his[i] = c.before.Add(c.wait), c.after.Add(c.wait)
	}
	slices.SortFunc(los, time.Time.Compare)
	slices.SortFunc(his, time.Time.Compare)
	b, interval := l.EffectiveBurst(), l.Interval()
	for k := range calls {
		want := time.Duration(max(k-b+1, 0)) * interval
		if his[k].Before(t0.Add(want - cfg.Slack)) {
			t.Errorf("event %d of %d is at most %s after the start, want at least %s", k, len(calls), his[k].Sub(t0), want)
		}
		if los[k].After(last.Add(want + cfg.Slack)) {
			t.Errorf("event %d of %d is at least %s after the last call, want at most %s", k, len(calls), los[k].Sub(last), want)
		}
	}
	// No B+1 events within less than an interval: sorted by the middle
	// of their bounds, any B+1 in a row span at least an interval, which
	// their widest bounds must allow.
	mid := func(c call) time.Time { return c.before.Add(c.after.Sub(c.before)/2 + c.wait) }
	slices.SortFunc(calls, func(a, b call) int { return mid(a).Compare(mid(b)) })
	for k := 0; k+b < len(calls); k++ {
		group := calls[k : k+b+1]
		lo, hi := group[0].before.Add(group[0].wait), group[0].after.Add(group[0].wait)
		for _, c := range group[1:] {
			if e := c.before.Add(c.wait); e.Before(lo) {
				lo = e
			}
			if e := c.after.Add(c.wait); e.After(hi) {
				hi = e
			}
		}
		if span := hi.Sub(lo); span < interval-cfg.Slack {
			t.Errorf("events %d to %d (of %d) span at most %s, less than the interval %s", k, k+b, len(calls), span, interval)
		}
	}
}

// doneContext: a done context is returned as ctx.Err(), and takes nothing.
func doneContext(t *testing.T, cfg Config) {
	lim := cfg.New(t)
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, cancel2 := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancel2()
	for _, ctx := range []context.Context{cancelled, expired} {
		_, ok, err := lim.Reserve(ctx, "k", twoAtOnce, time.Hour)
		if ok || !errors.Is(err, ctx.Err()) {
			t.Errorf("Reserve with a done context: ok=%v err=%v, want %v", ok, err, ctx.Err())
		}
		if states, _, _, err := lim.States(ctx, "", 0); len(states) != 0 || !errors.Is(err, ctx.Err()) {
			t.Errorf("States with a done context: %d states, err=%v, want %v", len(states), err, ctx.Err())
		}
	}
	for range twoAtOnce.EffectiveBurst() {
		if c := reserve(t, cfg, lim, "k", twoAtOnce, 0); !c.ok || c.wait != 0 {
			t.Fatalf("after calls with done contexts: ok=%v wait=%s, want the whole burst at once", c.ok, c.wait)
		}
	}
}

// invalidLimit: a Limit that Check refuses is an error matching
// ratelimit.ErrLimit, and takes nothing.
func invalidLimit(t *testing.T, cfg Config) {
	lim := cfg.New(t)
	for _, l := range []ratelimit.Limit{
		{},
		{Count: 0, Per: time.Second},
		{Count: ratelimit.MaxCount + 1, Per: time.Second},
		{Count: 1, Per: 0},
		{Count: 1, Per: -time.Second},
		{Count: 1, Per: ratelimit.MaxPer + 1},
		{Count: 1, Per: time.Second, Burst: -1},
		{Count: 1, Per: time.Second, Burst: ratelimit.MaxCount + 1},
	} {
		wait, ok, err := lim.Reserve(context.Background(), "k", l, time.Hour)
		if ok || wait != 0 || !errors.Is(err, ratelimit.ErrLimit) {
			t.Errorf("Reserve under %+v: wait=%s ok=%v err=%v, want an error matching ErrLimit", l, wait, ok, err)
		}
	}
	for range twoAtOnce.EffectiveBurst() {
		if c := reserve(t, cfg, lim, "k", twoAtOnce, 0); !c.ok || c.wait != 0 {
			t.Fatalf("after invalid limits: ok=%v wait=%s, want the whole burst at once", c.ok, c.wait)
		}
	}
}
