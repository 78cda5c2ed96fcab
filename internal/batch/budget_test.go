package batch

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// TestBudget: how many items a chunk takes and when the next is due, on
// an injected clock.
func TestBudget(t *testing.T) {
	t.Parallel()
	ms := time.Millisecond
	tests := []struct {
		name  string
		rate  float64
		last  time.Duration // before now; 0: no chunk yet
		chunk int
		n     int
		wake  time.Duration // after now
	}{
		{"first chunk: a second's worth", 10, 0, 500, 10, time.Second},
		{"first chunk: capped by chunk", 2000, 0, 500, 500, 250 * ms},
		{"first chunk below one a second: one item", 0.5, 0, 500, 1, 2 * time.Second},
		{"below one a second, too soon", 0.5, time.Second, 500, 0, time.Second},
		{"below one a second, on time", 0.5, 2 * time.Second, 500, 1, 2 * time.Second},
		{"below one a second, long idle", 0.5, time.Hour, 500, 1, 2 * time.Second},
		{"a fractional rate, on time", 2.5, 800 * ms, 500, 2, 800 * ms},
		{"high, on time", 2000, 250 * ms, 500, 500, 250 * ms},
		{"high, early", 2000, 100 * ms, 500, 200, 250 * ms},
		{"high, late: no more than a chunk", 2000, 900 * ms, 500, 500, 250 * ms},
		{"just too soon for one item", 10, 99 * ms, 500, 0, 901 * ms},
		{"long idle: a second's worth", 10, time.Hour, 500, 10, time.Second},
		{"long idle: no burst beyond chunk", 100, time.Hour, 50, 50, 500 * ms},
		{"clock went back: as a first chunk", 10, -time.Hour, 500, 10, time.Second},
		{"clock went back, slow rate", 0.5, -time.Minute, 500, 1, 2 * time.Second},
		{"no limit", 0, time.Millisecond, 500, 500, 0},
		{"no limit: infinite", math.Inf(1), 0, 200, 200, 0},
		{"no limit: not a number", math.NaN(), 0, 200, 200, 0},
		{"no chunk", 10, time.Second, 0, 0, 0},
		{"a very high rate", 1e300, time.Second, 500, 500, time.Nanosecond},
		{"a very low rate", 1e-300, time.Hour, 500, 0, math.MaxInt64 - time.Hour},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var last time.Time
			if tt.last != 0 {
				last = t0.Add(-tt.last)
			}
			n, wake := Budget(tt.rate, last, t0, tt.chunk)
			if n != tt.n || !wake.Equal(t0.Add(tt.wake)) {
				t.Errorf("Budget(%v, now-%v, now, %d) = %d, now+%v; want %d, now+%v", tt.rate, tt.last, tt.chunk, n, wake.Sub(t0), tt.n, tt.wake)
			}
		})
	}
}

// TestBudgetKeepsTheRate: a stepper that wakes when told applies the rate
// over a minute, within one chunk; one that wakes at any times applies no
// more.
func TestBudgetKeepsTheRate(t *testing.T) {
	t.Parallel()
	const span = time.Minute
	for _, rate := range []float64{0.5, 1, 2.5, 3, 10, 333.3, 1000, 7000} {
		const chunk = 500
		step := min(chunk, max(1, math.Floor(rate)))
		want := rate * span.Seconds()

		// On time.
		total, last, now := 0, time.Time{}, t0
		for now.Before(t0.Add(span)) {
			n, wake := Budget(rate, last, now, chunk)
			if n > 0 {
				total, last = total+n, now
			}
			if !wake.After(now) {
				t.Fatalf("rate %v: wake %v is not after now %v", rate, wake, now)
			}
			now = wake
		}
		if math.Abs(float64(total)-want) > step {
			t.Errorf("rate %v, woken on time: %d items in %v, want %v ± %v", rate, total, span, want, step)
		}

		// At random times, some late, some early.
		rnd := rand.New(rand.NewPCG(1, uint64(rate*10)))
		total, last, now = 0, time.Time{}, t0
		for now.Before(t0.Add(span)) {
			n, _ := Budget(rate, last, now, chunk)
			if n > 0 {
				total, last = total+n, now
			}
			now = now.Add(time.Duration(rnd.Int64N(int64(1500 * time.Millisecond))))
		}
		if float64(total) > want+step {
			t.Errorf("rate %v, woken at random: %d items in %v, more than %v + %v", rate, total, span, want, step)
		}
	}
}
