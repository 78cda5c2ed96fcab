package batch

import (
	"math"
	"time"
)

// Budget is how many items the stepper may apply now, at rate items per
// second, given last, the time it applied its last chunk (State.LastApply;
// zero before the first), capped by chunk; and wake, when to step the
// batch next. The stepper applies n items (fewer if fewer are pending),
// records now as LastApply when n > 0 — leaving it alone when n is 0 —
// and sets the batch's Wake to wake.
//
// The items accrue at rate from last, and at most one second's worth of
// them (at least one item) are taken at once: a batch that stood still —
// held, or its stepper's node dead — does not burst when it moves again.
// So a chunk is at most min(chunk, max(1, ⌊rate⌋)) items, the step; wake
// is when a whole step will have accrued since the last chunk taken. The first
// chunk takes a step at once; so does a chunk whose last is after now (a
// clock that went back), rather than waiting for the clock to catch up.
//
// A rate that is not positive and finite (0, a document's "no limit")
// takes chunk items, and wakes now. A chunk below 1 takes nothing.
func Budget(rate float64, last, now time.Time, chunk int) (n int, wake time.Time) {
	if chunk < 1 {
		return 0, now
	}
	if !(rate > 0) || math.IsInf(rate, 1) {
		return chunk, now
	}
	// window is one second, or the time of one item when that is longer.
	window := max(1, 1/rate)
	step := min(float64(chunk), max(1, math.Floor(rate)))
	elapsed := window
	if !last.IsZero() && !now.Before(last) {
		elapsed = min(now.Sub(last).Seconds(), window)
	}
	// The epsilon absorbs the rounding of a wake that is exactly on time.
	n = int(min(float64(chunk), step, math.Floor(rate*elapsed+1e-9)))
	from := now
	if n == 0 {
		from = last
	}
	return n, from.Add(seconds(step / rate))
}

// seconds is s seconds as a duration, rounded up to the nanosecond, so
// that a wake is never before its items have accrued.
func seconds(s float64) time.Duration {
	ns := math.Ceil(s * 1e9)
	if ns >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
