package ratelimit_test

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
)

// FuzzReserve checks one decision against the package doc's formula,
// computed in arbitrary precision: any times of the domain (the whole of
// int64 Unix nanoseconds), any Limit, any maxWait. The committed corpus is
// under testdata/fuzz/FuzzReserve.
func FuzzReserve(f *testing.F) {
	s := int64(time.Second)
	f.Add(int64(0), false, int64(0), 10, s, 3, int64(0))
	f.Add(int64(2*s), false, int64(s), 1, s, 1, int64(s))
	f.Add(int64(0), true, int64(s), 1_000_000, int64(time.Millisecond), 1, int64(-1))
	f.Add(int64(math.MaxInt64), false, int64(math.MinInt64), 1, int64(24*time.Hour), 1_000_000, int64(math.MaxInt64))
	f.Add(int64(5*s), false, int64(0), 0, s, 1, int64(s))
	f.Fuzz(func(t *testing.T, tatNs int64, idle bool, nowNs int64, count int, perNs int64, burst int, maxWait int64) {
		l := ratelimit.Limit{Count: count, Per: time.Duration(perNs), Burst: burst}
		tat, now := time.Unix(0, tatNs), time.Unix(0, nowNs)
		if idle {
			tat = time.Time{}
		}
		d, err := l.Reserve(tat, now, time.Duration(maxWait))
		if !d.TAT.Equal(tat) && !d.OK {
			t.Fatalf("refused with TAT %v, given %v", d.TAT, tat)
		}
		if l.Check() != nil {
			if !errors.Is(err, ratelimit.ErrLimit) || d.OK {
				t.Fatalf("invalid %+v: got %+v, %v; want a refusal matching ErrLimit", l, d, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("valid %+v: %v", l, err)
		}
		// The formula: start = max(tat, now), wait = max(0, start + I -
		// B·I - now), ok = wait ≤ max(maxWait, 0), TAT' = start + I.
		i := big.NewInt(int64(l.Interval()))
		start := big.NewInt(nowNs)
		if !idle && tatNs > nowNs {
			start.SetInt64(tatNs)
		}
		wait := new(big.Int).Add(start, i)
		wait.Sub(wait, new(big.Int).Mul(big.NewInt(int64(l.EffectiveBurst())), i))
		wait.Sub(wait, big.NewInt(nowNs))
		if wait.Sign() < 0 {
			wait.SetInt64(0)
		}
		ok := wait.Cmp(big.NewInt(max(maxWait, 0))) <= 0
		wantWait := int64(math.MaxInt64)
		if wait.IsInt64() {
			wantWait = wait.Int64()
		}
		if d.OK != ok || int64(d.Wait) != wantWait {
			t.Fatalf("%+v at tat=%d now=%d max_wait=%d: got ok=%v wait=%d, want ok=%v wait=%d",
				l, tatNs, nowNs, maxWait, d.OK, d.Wait, ok, wantWait)
		}
		if ok {
			startT := time.Unix(0, start.Int64())
			if got := d.TAT.Sub(startT); got != l.Interval() {
				t.Fatalf("granted: TAT %v is %v after max(tat, now) = %v, want the interval %v", d.TAT, got, startT, l.Interval())
			}
		}
	})
}

// FuzzSequence runs a sequence of reservations on one key (decodeRun
// decodes it from the bytes) and checks the package doc's promises: a
// refusal changes nothing, a grant's wait is within its maxWait, the TAT
// never goes back, and, with the Limit fixed, no window of length T holds
// more than B + T/I of the granted events, whatever the clock does. The
// committed corpus is under testdata/fuzz/FuzzSequence.
func FuzzSequence(f *testing.F) {
	f.Add([]byte{9, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 4, 0, 5, 0, 6})
	f.Add([]byte{0, 2, 0, 0, 2, 7, 0, 7, 3, 7, 2, 1, 1, 2, 0, 0})
	f.Add([]byte{4, 0, 4, 1, 0, 6, 1, 6, 2, 6, 0, 3, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) { runSequence(t, data) })
}

// TestRandomRuns is FuzzSequence's check over many seeded random
// sequences, so that every `go test` explores more than the corpus.
func TestRandomRuns(t *testing.T) {
	t.Parallel()
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 35))
		data := make([]byte, 4+2*r.IntN(400))
		for i := range data {
			data[i] = byte(r.UintN(256))
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runSequence(t, data) })
	}
}

// A run's choices. Periods and maximum waits are few and round, so that
// calls land exactly on TATs; one step goes back 2s (a clock set back).
var (
	pers     = []time.Duration{10 * time.Millisecond, 100 * time.Millisecond, time.Second, time.Minute}
	steps    = []time.Duration{0, 0, 0, time.Millisecond, 10 * time.Millisecond, 100 * time.Millisecond, time.Second, -2 * time.Second}
	maxWaits = []time.Duration{-time.Second, 0, 0, time.Millisecond, 50 * time.Millisecond, time.Second, time.Minute, time.Hour}
)

// call is one reservation of a run.
type call struct {
	l       ratelimit.Limit
	step    time.Duration
	maxWait time.Duration
}

// decodeRun reads a run: 4 bytes for the Limit (count 1 to 10, per, burst
// 0 to 4, and in bit 0 of the fourth whether each call changes it), then
// 2 bytes a call (the time step, the maxWait; with changing limits, the
// call's count and burst from the same bytes), at most 1,000 calls.
func decodeRun(data []byte) (calls []call, fixed bool) {
	if len(data) < 4 {
		return nil, true
	}
	l := ratelimit.Limit{Count: 1 + int(data[0]%10), Per: pers[data[1]%4], Burst: int(data[2] % 5)}
	fixed = data[3]%2 == 0
	for i := 4; i+2 <= len(data) && len(calls) < 1000; i += 2 {
		c := call{l: l, step: steps[data[i]%8], maxWait: maxWaits[data[i+1]%8]}
		if !fixed {
			c.l.Count = 1 + int(data[i]/8%10)
			c.l.Burst = int(data[i+1] / 8 % 5)
		}
		calls = append(calls, c)
	}
	return calls, fixed
}

// runSequence runs the calls of data on one key and checks every step,
// then the window bound over the events granted.
func runSequence(t *testing.T, data []byte) {
	calls, fixed := decodeRun(data)
	now := epoch
	var tat time.Time
	var events []time.Time
	for n, c := range calls {
		now = now.Add(c.step)
		d, err := c.l.Reserve(tat, now, c.maxWait)
		if err != nil {
			t.Fatalf("call %d (%+v at %s): %v", n, c, offset(now), err)
		}
		switch {
		case !d.OK:
			if !d.TAT.Equal(tat) {
				t.Fatalf("call %d (%+v at %s): refused, but the TAT moved from %s to %s", n, c, offset(now), offset(tat), offset(d.TAT))
			}
			if d.Wait <= max(c.maxWait, 0) {
				t.Fatalf("call %d (%+v at %s): refused with a wait of %s, within max_wait", n, c, offset(now), d.Wait)
			}
		case d.Wait < 0 || d.Wait > max(c.maxWait, 0):
			t.Fatalf("call %d (%+v at %s): granted with a wait of %s", n, c, offset(now), d.Wait)
		case !tat.IsZero() && d.TAT.Sub(tat) < c.l.Interval():
			t.Fatalf("call %d (%+v at %s): granted, but the TAT moved from %s to %s, less than an interval", n, c, offset(now), offset(tat), offset(d.TAT))
		default:
			events = append(events, now.Add(d.Wait))
			tat = d.TAT
		}
	}
	if fixed && len(calls) > 0 {
		checkWindows(t, calls[0].l, events)
	}
}

// checkWindows fails the test when a window of length T holds more than
// B + T/I of the events: for the events sorted, any from the a-th to the
// z-th (z ≥ a+B) span at least (z-a+1-B)·I. With f(k) = e_k - k·I, that is
// f(z) ≥ f(a) - (B-1)·I for every a ≤ z-B: one pass, keeping the largest
// f(a) so far.
func checkWindows(t *testing.T, l ratelimit.Limit, events []time.Time) {
	t.Helper()
	events = slices.SortedFunc(slices.Values(events), time.Time.Compare)
	b, i := l.EffectiveBurst(), l.Interval()
	f := func(k int) time.Duration { return events[k].Sub(epoch) - time.Duration(k)*i }
	top := 0 // the a ≤ z-B with the largest f(a)
	for z := b; z < len(events); z++ {
		if f(z-b) > f(top) {
			top = z - b
		}
		if span, want := events[z].Sub(events[top]), time.Duration(z-top+1-b)*i; span < want {
			t.Fatalf("%+v: the %d events from %s to %s span %s, less than the %s the limit allows",
				l, z-top+1, offset(events[top]), offset(events[z]), span, want)
		}
	}
}

// TestSteadyDemand simulates clients that each take an event, act at its
// time and ask for the next at once, from a quiet key: the first window
// of length T gets exactly B + ⌊T/I⌋ events, and every later window ⌊T/I⌋
// or one more — exactly the rate, whether the clients reserve (wait for
// their slot) or ask without waiting and come back when told.
func TestSteadyDemand(t *testing.T) {
	t.Parallel()
	tests := []struct {
		l       ratelimit.Limit
		clients int
		maxWait time.Duration // 0: refused calls come back at their wait
		window  time.Duration
	}{
		{l: ratelimit.Limit{Count: 100, Per: time.Second}, clients: 1, maxWait: time.Hour, window: time.Second},
		{l: ratelimit.Limit{Count: 100, Per: time.Second}, clients: 64, maxWait: time.Hour, window: time.Second},
		{l: ratelimit.Limit{Count: 100, Per: time.Second}, clients: 64, maxWait: 0, window: time.Second},
		{l: ratelimit.Limit{Count: 10, Per: time.Second, Burst: 20}, clients: 8, maxWait: 5 * time.Second, window: 3 * time.Second},
		{l: ratelimit.Limit{Count: 3, Per: time.Second, Burst: 2}, clients: 5, maxWait: 0, window: 10 * time.Second},
		{l: ratelimit.Limit{Count: 1000, Per: time.Minute, Burst: 7}, clients: 3, maxWait: 10 * time.Millisecond, window: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/clients=%d/max_wait=%s", tt.l, tt.clients, tt.maxWait), func(t *testing.T) {
			t.Parallel()
			events := simulate(t, tt.l, tt.clients, tt.maxWait, epoch.Add(20*tt.window))
			b, per := tt.l.EffectiveBurst(), int(tt.window/tt.l.Interval())
			if got, want := count(events, epoch, tt.window), b+per; got != want {
				t.Errorf("the first %s from quiet: %d events, want %d", tt.window, got, want)
			}
			// Every later window, starting at an event once the burst is
			// spent, and ending within the simulated time.
			for _, start := range events[b:] {
				if start.Add(tt.window).After(epoch.Add(19 * tt.window)) {
					break
				}
				if got := count(events, start, tt.window); got != per && got != per+1 {
					t.Fatalf("the %s from %s: %d events, want %d or %d", tt.window, offset(start), got, per, per+1)
				}
			}
			checkWindows(t, tt.l, events)
		})
	}
}

// simulate runs clients on one key until end: each asks for an event
// with maxWait; granted, it acts at the event's time and asks again then;
// refused, it asks again when the wait it was told has passed. It returns
// the events in order.
func simulate(t *testing.T, l ratelimit.Limit, clients int, maxWait time.Duration, end time.Time) []time.Time {
	t.Helper()
	next := make([]time.Time, clients) // when each client asks next
	for c := range next {
		next[c] = epoch
	}
	var tat time.Time
	var events []time.Time
	for {
		c := 0
		for k := range next {
			if next[k].Before(next[c]) {
				c = k
			}
		}
		now := next[c]
		if now.After(end) {
			return events
		}
		d, err := l.Reserve(tat, now, maxWait)
		if err != nil {
			t.Fatal(err)
		}
		if d.OK {
			tat = d.TAT
			events = append(events, now.Add(d.Wait))
		}
		next[c] = now.Add(d.Wait)
	}
}

// count returns how many events lie in [from, from+window].
func count(events []time.Time, from time.Time, window time.Duration) int {
	n := 0
	for _, e := range events {
		if !e.Before(from) && !e.After(from.Add(window)) {
			n++
		}
	}
	return n
}
