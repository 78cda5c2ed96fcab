package ratelimit_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
)

// TestBacklogMatchesSimulation reserves events on one key with a fixed
// Limit and a clock that never goes back, keeps every granted event's
// time, and after each call, and at a few later times, compares Backlog
// with the events whose time has not come: the counts must be equal, and
// the next event's time that of a reservation that may wait for ever.
func TestBacklogMatchesSimulation(t *testing.T) {
	t.Parallel()
	var (
		moves    = []time.Duration{0, 0, 0, time.Nanosecond, time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond, time.Second, time.Minute}
		maxWaits = []time.Duration{0, 0, time.Millisecond, 50 * time.Millisecond, time.Second, time.Minute, time.Hour}
		probes   = []time.Duration{0, time.Nanosecond, 7 * time.Millisecond, 100 * time.Millisecond, 3 * time.Second}
	)
	for seed := range uint64(300) {
		r := rand.New(rand.NewPCG(seed, 36))
		l := ratelimit.Limit{Count: 1 + r.IntN(10), Per: pers[r.IntN(len(pers))], Burst: r.IntN(5)}
		if seed%10 == 0 { // a rate that does not divide its period
			l.Count = 7
		}
		t.Run(fmt.Sprintf("%d/%s", seed, l), func(t *testing.T) {
			t.Parallel()
			now := epoch
			var tat time.Time
			var events []time.Time
			for n := range 300 {
				now = now.Add(moves[r.IntN(len(moves))])
				d, err := l.Reserve(tat, now, maxWaits[r.IntN(len(maxWaits))])
				if err != nil {
					t.Fatal(err)
				}
				if d.OK {
					tat = d.TAT
					// With the Limit fixed and the clock going forward,
					// the events come in order: the count below relies
					// on it.
					e := now.Add(d.Wait)
					if len(events) > 0 && e.Before(events[len(events)-1]) {
						t.Fatalf("call %d: event at %s, before the last one at %s", n, offset(e), offset(events[len(events)-1]))
					}
					events = append(events, e)
				}
				s := ratelimit.KeyState{Key: "k", Limit: l, TAT: tat}
				for _, p := range probes {
					at := now.Add(p)
					want := 0
					for k := len(events) - 1; k >= 0 && events[k].After(at); k-- {
						want++
					}
					ahead, next := s.Backlog(at)
					if ahead != want {
						t.Fatalf("call %d, TAT %s, at %s: ahead=%d, want %d (the events after it)", n, offset(tat), offset(at), ahead, want)
					}
					forever, err := l.Reserve(tat, at, math.MaxInt64)
					if err != nil || !forever.OK {
						t.Fatalf("call %d, at %s: a reservation that may wait for ever: %+v, %v", n, offset(at), forever, err)
					}
					if want := at.Add(forever.Wait); !next.Equal(want) {
						t.Fatalf("call %d, TAT %s, at %s: next=%s, want %s (when Reserve would grant it)", n, offset(tat), offset(at), offset(next), offset(want))
					}
				}
			}
		})
	}
}

// TestBacklogUnknownTerms: a state whose Limit is not valid (terms that
// a limiter does not know) shows nothing ahead and its TAT as the latest
// the next event could be; an idle one shows now.
func TestBacklogUnknownTerms(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s           ratelimit.KeyState
		at          time.Time
		ahead       int
		next        time.Time
		description string
	}{
		{description: "unknown terms, TAT ahead", s: ratelimit.KeyState{TAT: epoch.Add(time.Hour)}, at: epoch, next: epoch.Add(time.Hour)},
		{description: "unknown terms, idle", s: ratelimit.KeyState{TAT: epoch}, at: epoch.Add(time.Second), next: epoch.Add(time.Second)},
		{description: "no state", s: ratelimit.KeyState{Limit: ratelimit.Limit{Count: 1, Per: time.Second}}, at: epoch, next: epoch},
		{description: "TAT at now", s: ratelimit.KeyState{Limit: ratelimit.Limit{Count: 1, Per: time.Second}, TAT: epoch}, at: epoch, next: epoch},
	}
	for _, tt := range tests {
		ahead, next := tt.s.Backlog(tt.at)
		if ahead != tt.ahead || !next.Equal(tt.next) {
			t.Errorf("%s: Backlog(%s) = %d, %s; want %d, %s", tt.description, offset(tt.at), ahead, offset(next), tt.ahead, offset(tt.next))
		}
	}
}

// FuzzBacklog checks Backlog against the package's formulas computed in
// arbitrary precision, for any times of the domain and any Limit: ahead =
// max(0, ⌈(TAT − now)/I⌉ − B), next = max(now, TAT − (B−1)·I), which is
// also now plus the wait of a Reserve that may wait for ever. The
// committed corpus is under testdata/fuzz/FuzzBacklog.
func FuzzBacklog(f *testing.F) {
	s := int64(time.Second)
	f.Add(int64(4*3600*s), false, int64(0), 1, int64(time.Hour), 1)
	f.Add(int64(600*time.Millisecond), false, int64(150*time.Millisecond), 10, s, 3)
	f.Add(int64(999_999_999), false, int64(333_333_332), 3, s, 0)
	f.Add(int64(math.MaxInt64), false, int64(math.MinInt64), 1_000_000, int64(time.Millisecond), 1)
	f.Add(int64(math.MaxInt64), false, int64(math.MinInt64), 1, int64(24*time.Hour), 1_000_000)
	f.Add(int64(s), false, int64(0), 0, s, 1)
	f.Add(int64(s), true, int64(0), 1, s, 1)
	f.Fuzz(func(t *testing.T, tatNs int64, idle bool, nowNs int64, count int, perNs int64, burst int) {
		st := ratelimit.KeyState{Key: "k", Limit: ratelimit.Limit{Count: count, Per: time.Duration(perNs), Burst: burst}, TAT: time.Unix(0, tatNs)}
		if idle {
			st.TAT = time.Time{}
		}
		now := time.Unix(0, nowNs)
		ahead, next := st.Backlog(now)
		if !st.TAT.After(now) {
			if ahead != 0 || !next.Equal(now) {
				t.Fatalf("%+v at %d, TAT not ahead: %d, %v; want 0, now", st.Limit, nowNs, ahead, next)
			}
			return
		}
		if st.Limit.Check() != nil {
			if ahead != 0 || !next.Equal(st.TAT) {
				t.Fatalf("invalid %+v at %d: %d, %v; want 0 and the TAT", st.Limit, nowNs, ahead, next)
			}
			return
		}
		i := big.NewInt(int64(st.Limit.Interval()))
		b := big.NewInt(int64(st.Limit.EffectiveBurst()))
		gap := new(big.Int).Sub(big.NewInt(tatNs), big.NewInt(nowNs))
		// ⌈gap/I⌉ − B, gap > 0.
		turns := new(big.Int).Sub(gap, big.NewInt(1))
		turns.Quo(turns, i)
		turns.Add(turns, big.NewInt(1))
		wantAhead := new(big.Int).Sub(turns, b)
		switch {
		case wantAhead.Sign() < 0:
			wantAhead.SetInt64(0)
		case !wantAhead.IsInt64():
			wantAhead.SetInt64(math.MaxInt64)
		}
		if int64(ahead) != wantAhead.Int64() {
			t.Fatalf("%+v, TAT %d, at %d: ahead=%d, want %s", st.Limit, tatNs, nowNs, ahead, wantAhead)
		}
		wantNext := new(big.Int).Sub(b, big.NewInt(1))
		wantNext.Mul(wantNext, i)
		wantNext.Sub(big.NewInt(tatNs), wantNext)
		if wantNext.Cmp(big.NewInt(nowNs)) < 0 {
			wantNext.SetInt64(nowNs)
		}
		if got := next.UnixNano(); got != wantNext.Int64() {
			t.Fatalf("%+v, TAT %d, at %d: next=%d, want %s", st.Limit, tatNs, nowNs, got, wantNext)
		}
		if d, err := st.Limit.Reserve(st.TAT, now, math.MaxInt64); err == nil && d.OK && !now.Add(d.Wait).Equal(next) {
			t.Fatalf("%+v, TAT %d, at %d: next=%v, but Reserve would grant it at %v", st.Limit, tatNs, nowNs, next, now.Add(d.Wait))
		}
	})
}
