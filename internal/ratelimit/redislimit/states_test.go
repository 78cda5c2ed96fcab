package redislimit_test

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/ratelimit/redislimit"
	"github.com/weftworks/weft/internal/redistest"
)

// TestOldFormat: a value of the TAT alone, as versions before the terms
// wrote it (a rolling upgrade finds such keys), is listed with the zero
// Limit, and Reserve reads it and writes the new format.
func TestOldFormat(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	l, err := redislimit.New(redislimit.Config{Client: c, Prefix: "old:"})
	if err != nil {
		t.Fatal(err)
	}
	tat := time.Now().Add(time.Hour)
	if err := c.Set(ctx(t), l.Key("partner"), strconv.FormatInt(tat.UnixNano(), 10), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	states, now, truncated, err := l.States(ctx(t), "", 0)
	if err != nil || truncated || len(states) != 1 {
		t.Fatalf("States: %+v, truncated %v, err %v; want the one key", states, truncated, err)
	}
	want := ratelimit.KeyState{Key: "partner", TAT: time.Unix(0, tat.UnixNano())}
	if s := states[0]; s.Key != want.Key || s.Limit != want.Limit || !s.TAT.Equal(want.TAT) {
		t.Fatalf("States: %+v, want %+v (the terms unknown)", s, want)
	}
	if ahead, next := states[0].Backlog(now); ahead != 0 || !next.Equal(want.TAT) {
		t.Errorf("Backlog of an old value: %d, %s; want 0 and its TAT", ahead, next)
	}
	// One a minute, burst 1: the next event is at the old TAT.
	lim := ratelimit.Limit{Count: 1, Per: time.Minute}
	wait, ok, err := l.Reserve(ctx(t), "partner", lim, 0)
	if ok || err != nil || wait < 59*time.Minute || wait > time.Hour {
		t.Fatalf("Reserve on an old value, max wait 0: wait=%s ok=%v err=%v; want a refusal of about an hour", wait, ok, err)
	}
	if wait, ok, err = l.Reserve(ctx(t), "partner", lim, 2*time.Hour); !ok || err != nil || wait < 59*time.Minute || wait > time.Hour {
		t.Fatalf("Reserve on an old value, max wait 2h: wait=%s ok=%v err=%v; want granted in about an hour", wait, ok, err)
	}
	v, err := c.Get(ctx(t), l.Key("partner")).Result()
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("%d 1 60000000000 0", tat.Add(time.Minute).UnixNano()); v != want {
		t.Errorf("the value after Reserve: %q, want %q", v, want)
	}
}

// TestStatesErrors: a value under the limiter's keys that is not a state
// is an error naming its Redis key (it is our own data: a foreign value is
// a bug to see); a server that is down is an error naming its address.
func TestStatesErrors(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	c := s.Client(t)
	for i, tt := range []struct{ key, value string }{
		{"{bad}", "not a time"},
		{"{bad}", "1777636800100000000 1 1000000000"},
		{"{bad}", "1777636800100000000 0 1000000000 1"},
		{"{bad}", "1777636800100000000 1 1000000000 1 extra"},
		{"{bad}", "1777636800100000000  1 1000000000 1"},
		{"{bad", "1777636800100000000"},
	} {
		prefix := fmt.Sprintf("errors-%d:", i)
		l, err := redislimit.New(redislimit.Config{Client: c, Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		rkey := prefix + "rate:" + tt.key
		if err := c.Set(ctx(t), rkey, tt.value, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		states, _, _, err := l.States(ctx(t), "", 0)
		if err == nil || !strings.Contains(err.Error(), rkey) {
			t.Errorf("States over %s = %q: %+v, err %v; want an error naming %s", rkey, tt.value, states, err, rkey)
		}
	}
	l, err := redislimit.New(redislimit.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	s.Stop(t)
	if _, _, _, err := l.States(ctx(t), "", 0); err == nil || !strings.Contains(err.Error(), s.Addr()) {
		t.Errorf("States with the server down: %v, want an error naming %s", err, s.Addr())
	}
}

// TestStatesBound: States reads about ten times the states asked for, not
// every key (counted with Redis's command statistics), and says it was
// truncated; with room for every key it lists the first, sorted.
func TestStatesBound(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	l, err := redislimit.New(redislimit.Config{Client: c})
	if err != nil {
		t.Fatal(err)
	}
	const n = 5000
	lim := ratelimit.Limit{Count: 1, Per: time.Hour}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%04d", i)
		if _, ok, err := l.Reserve(ctx(t), keys[i], lim, 0); !ok || err != nil {
			t.Fatalf("Reserve(%s): ok=%v err=%v", keys[i], ok, err)
		}
	}
	gets := func() int {
		t.Helper()
		info, err := c.Info(ctx(t), "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.Lines(info) {
			if rest, ok := strings.CutPrefix(line, "cmdstat_get:calls="); ok {
				calls, _, _ := strings.Cut(rest, ",")
				v, err := strconv.Atoi(calls)
				if err != nil {
					t.Fatalf("INFO commandstats: %q: %v", line, err)
				}
				return v
			}
		}
		return 0
	}
	before := gets()
	states, _, truncated, err := l.States(ctx(t), "", 10)
	if err != nil || len(states) != 10 || !truncated {
		t.Fatalf("States(max 10): %d states, truncated %v, err %v; want 10, truncated", len(states), truncated, err)
	}
	// One SCAN round trip walks about 1,000 keys: the bound of 100 keys
	// seen stops it after the first.
	if read := gets() - before; read > n/2 {
		t.Errorf("States(max 10) read %d of the %d keys, want about the first SCAN's 1,000", read, n)
	}
	if !slices.IsSortedFunc(states, func(a, b ratelimit.KeyState) int { return strings.Compare(a.Key, b.Key) }) {
		t.Errorf("States(max 10): not sorted")
	}
	// 1,000 asked for (the default): 10,000 keys may be seen, so all of
	// them are, and the first 1,000 are listed.
	states, _, truncated, err = l.States(ctx(t), "", 0)
	if err != nil || !truncated {
		t.Fatalf("States(max 0): truncated %v, err %v; want truncated", truncated, err)
	}
	var got []string
	for _, s := range states {
		got = append(got, s.Key)
	}
	if !slices.Equal(got, keys[:1000]) {
		t.Errorf("States(max 0): %d keys from %q to %q, want the first 1000 (k0000 to k0999)", len(got), got[0], got[len(got)-1])
	}
	if states, _, truncated, err = l.States(ctx(t), "k49", 0); err != nil || len(states) != 100 || truncated {
		t.Errorf("States(k49): %d states, truncated %v, err %v; want 100, not truncated", len(states), truncated, err)
	}
}

// TestGlobEscape holds globEscape to Redis's MATCH: the escaped prefix of
// any bytes matches exactly the keys that start with it.
func TestGlobEscape(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	keys := []string{"a", "a*", "a*b", "a?", "ab", "a[b]", "a[", "a]", `a\`, `a\b`, "a^", "a-", "a{b}", "\xff", "\xff*", "ключ", "*", "?", "[", `\`, ""}
	if err := c.MSet(ctx(t), func() []any {
		var kv []any
		for _, k := range keys {
			kv = append(kv, "glob:"+k, "1")
		}
		return kv
	}()...).Err(); err != nil {
		t.Fatal(err)
	}
	for _, prefix := range append(keys, "a[b", `a\*`, "a[^b]") {
		var matched []string
		iter := c.Scan(ctx(t), 0, redislimit.GlobEscape("glob:"+prefix)+"*", 1000).Iterator()
		for iter.Next(ctx(t)) {
			matched = append(matched, strings.TrimPrefix(iter.Val(), "glob:"))
		}
		if err := iter.Err(); err != nil {
			t.Fatal(err)
		}
		var want []string
		for _, k := range keys {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		slices.Sort(matched)
		slices.Sort(want)
		if !slices.Equal(matched, want) {
			t.Errorf("MATCH %q: %q, want %q", redislimit.GlobEscape("glob:"+prefix)+"*", matched, want)
		}
	}
}
