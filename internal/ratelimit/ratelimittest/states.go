package ratelimittest

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
)

// keyWant is what the model says of one key's state after a subtest's
// reservations, all made at one instant: its terms, and its TAT, backlog
// and next free turn as offsets from that instant.
type keyWant struct {
	key   string
	l     ratelimit.Limit
	tat   time.Duration
	ahead int
	next  time.Duration
}

// states reserves on several keys with various terms, through two nodes,
// and checks what States lists: every key whose TAT is ahead, sorted,
// filtered by prefix (glob characters are bytes like any other), cut at
// max with truncated said, each with the terms of its last granted event
// and a TAT and Backlog that agree with the reservations made.
func states(t *testing.T, cfg Config) {
	lim := cfg.New(t)
	shared := cfg.Share(t, lim)
	if got, _, truncated, err := lim.States(context.Background(), "", 0); err != nil || len(got) != 0 || truncated {
		t.Fatalf("States of a new limiter: %v, truncated %v, err %v; want none", got, truncated, err)
	}
	hourly := ratelimit.Limit{Count: 1, Per: time.Hour} // burst 0, kept as given
	take := func(on Limiter, key string, l ratelimit.Limit, maxWait time.Duration, n int) {
		t.Helper()
		for range n {
			if c := reserve(t, cfg, on, key, l, maxWait); !c.ok {
				t.Fatalf("Reserve(%q, %s, max wait %s): refused with a wait of %s", key, l, maxWait, c.wait)
			}
		}
	}
	t0 := cfg.Now()
	// One at once, then three callers that wait their turns: at 1h, 2h
	// and 3h, all still to come.
	take(lim, "step/a", hourly, 10*time.Hour, 4)
	// A refusal under other terms keeps the last granted ones.
	if c := reserve(t, cfg, shared, "step/a", tenSeconds, 0); c.ok {
		t.Fatalf("Reserve(step/a, %s, max wait 0) after its backlog: granted", tenSeconds)
	}
	// Within the burst: nothing to wait for.
	take(shared, "step/b", tenSeconds, 0, 2)
	// Burst 2, then turns at 10s and 20s; the next free one at 30s.
	take(shared, "host/x", twoAtOnce, time.Hour, 4)
	// Changed terms: the last ones are shown, and read the backlog.
	take(lim, "step/c", oneMinute, 0, 1)
	take(shared, "step/c", tenSeconds, time.Hour, 1)
	// Keys with the bytes of glob patterns and of hash tags.
	globs := []string{"b{r}a", "g*1", "g?2", "g[3]", `g\4`, "gx5"}
	for i, k := range globs {
		on := lim
		if i%2 == 1 {
			on = shared
		}
		take(on, k, twoAtOnce, 0, 1)
	}
	t1 := cfg.Now()

	wants := []keyWant{
		{key: "host/x", l: twoAtOnce, tat: 40 * time.Second, ahead: 2, next: 30 * time.Second},
		{key: "step/a", l: hourly, tat: 4 * time.Hour, ahead: 3, next: 4 * time.Hour},
		{key: "step/b", l: tenSeconds, tat: 20 * time.Second},
		// TAT 70s read with 10s and a burst of 3: 7 turns, 3 of them the
		// burst's (in truth one event waits: the count is approximate).
		{key: "step/c", l: tenSeconds, tat: 70 * time.Second, ahead: 4, next: 50 * time.Second},
	}
	for _, k := range globs {
		wants = append(wants, keyWant{key: k, l: twoAtOnce, tat: 10 * time.Second})
	}
	slices.SortFunc(wants, func(a, b keyWant) int { return cmp.Compare(a.key, b.key) })
	only := func(keys ...string) []keyWant {
		var out []keyWant
		for _, w := range wants {
			if slices.Contains(keys, w.key) {
				out = append(out, w)
			}
		}
		return out
	}
	tests := []struct {
		on        Limiter
		prefix    string
		max       int
		want      []keyWant
		truncated bool
	}{
		{on: lim, want: wants},
		{on: shared, want: wants},
		{on: lim, max: 100, want: wants},
		{on: lim, max: len(wants), want: wants},
		{on: shared, max: len(wants) - 1, want: wants[:len(wants)-1], truncated: true},
		{on: lim, max: 2, want: wants[:2], truncated: true},
		{on: lim, max: 1, want: wants[:1], truncated: true},
		{on: lim, prefix: "step/", want: only("step/a", "step/b", "step/c")},
		{on: shared, prefix: "step/", max: 3, want: only("step/a", "step/b", "step/c")},
		{on: lim, prefix: "step/", max: 2, want: only("step/a", "step/b"), truncated: true},
		{on: lim, prefix: "host/", want: only("host/x")},
		{on: lim, prefix: "step/a", want: only("step/a")},
		{on: lim, prefix: "g", want: only("g*1", "g?2", "g[3]", `g\4`, "gx5")},
		{on: lim, prefix: "g*", want: only("g*1")},
		{on: lim, prefix: "g?", want: only("g?2")},
		{on: lim, prefix: "g[", want: only("g[3]")},
		{on: lim, prefix: "g[3]", want: only("g[3]")},
		{on: lim, prefix: `g\`, want: only(`g\4`)},
		{on: lim, prefix: "b{", want: only("b{r}a")},
		{on: lim, prefix: "b{r}a", want: only("b{r}a")},
		{on: lim, prefix: "b{r}a}", want: nil},
		{on: lim, prefix: "*", want: nil},
		{on: lim, prefix: "nope/", want: nil},
	}
	for _, tt := range tests {
		before := cfg.Now()
		got, now, truncated, err := tt.on.States(context.Background(), tt.prefix, tt.max)
		after := cfg.Now()
		if err != nil {
			t.Fatalf("States(%q, %d): %v", tt.prefix, tt.max, err)
		}
		if now.Before(before.Add(-cfg.Slack)) || now.After(after.Add(cfg.Slack)) {
			t.Errorf("States(%q, %d): now %s, want between %s and %s", tt.prefix, tt.max, now, before, after)
		}
		keys := func(ss []ratelimit.KeyState) []string {
			var out []string
			for _, s := range ss {
				out = append(out, s.Key)
			}
			return out
		}(got)
		var wantKeys []string
		for _, w := range tt.want {
			wantKeys = append(wantKeys, w.key)
		}
		if !slices.Equal(keys, wantKeys) || truncated != tt.truncated {
			t.Errorf("States(%q, %d): keys %q, truncated %v; want %q, truncated %v", tt.prefix, tt.max, keys, truncated, wantKeys, tt.truncated)
			continue
		}
		for i, s := range got {
			checkState(t, cfg, s, now, tt.want[i], t0, t1)
		}
	}
}

// checkState checks one listed state against the model: its terms
// exactly; its TAT, and the next free turn, within what the clock's
// course between t0 and t1 allows; its backlog exactly (the scenario's
// intervals are long beside the calls' durations).
func checkState(t *testing.T, cfg Config, s ratelimit.KeyState, now time.Time, w keyWant, t0, t1 time.Time) {
	t.Helper()
	if s.Limit != w.l {
		t.Errorf("state of %q: Limit %+v, want %+v (the terms of its last granted event)", s.Key, s.Limit, w.l)
	}
	if lo, hi := t0.Add(w.tat-cfg.Slack), t1.Add(w.tat+cfg.Slack); s.TAT.Before(lo) || s.TAT.After(hi) {
		t.Errorf("state of %q: TAT %s after the first call, want %s (between %s and %s)", s.Key, s.TAT.Sub(t0), w.tat, lo, hi)
	}
	ahead, next := s.Backlog(now)
	if ahead != w.ahead {
		t.Errorf("state of %q: %d events ahead, want %d", s.Key, ahead, w.ahead)
	}
	lo, hi := t0.Add(w.next-cfg.Slack), t1.Add(w.next+cfg.Slack)
	if lo.Before(now) {
		lo = now
	}
	if hi.Before(now) {
		hi = now
	}
	if next.Before(lo) || next.After(hi) {
		t.Errorf("state of %q: next turn %s after now, want %s after the first call (between %s and %s)", s.Key, next.Sub(now), w.next, lo, hi)
	}
}

// idleKeys: a key whose TAT has passed is not listed, even when the
// limiter still holds it; keys whose TAT is ahead still are. It needs a
// clock that moves.
func idleKeys(t *testing.T, cfg Config) {
	lim := cfg.New(t)
	fast := ratelimit.Limit{Count: 2, Per: time.Second} // a TAT 500ms ahead
	before := cfg.Now()
	if c := reserve(t, cfg, lim, "idle/fast", fast, 0); !c.ok {
		t.Fatalf("Reserve(idle/fast): refused with a wait of %s", c.wait)
	}
	if c := reserve(t, cfg, lim, "idle/slow", oneMinute, 0); !c.ok {
		t.Fatalf("Reserve(idle/slow): refused with a wait of %s", c.wait)
	}
	tat := before.Add(fast.Interval() - cfg.Slack) // the earliest the TAT can be
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, now, _, err := lim.States(context.Background(), "idle/", 0)
		if err != nil {
			t.Fatalf("States(idle/): %v", err)
		}
		var keys []string
		for _, s := range got {
			keys = append(keys, s.Key)
		}
		switch {
		case !slices.Contains(keys, "idle/slow"):
			t.Fatalf("States(idle/) at %s: %q, without idle/slow, whose TAT is a minute ahead", now, keys)
		case now.Before(tat) && !slices.Contains(keys, "idle/fast"):
			t.Fatalf("States(idle/) at %s: %q, without idle/fast, whose TAT is at %s or later", now, keys, tat)
		case !slices.Contains(keys, "idle/fast"):
			return
		case time.Now().After(deadline):
			t.Fatalf("States(idle/) at %s: %q, idle/fast still listed 10s after its TAT", now, keys)
		}
		time.Sleep(10 * time.Millisecond) // polling until the key's TAT passes
	}
}
