package ratelimit

import (
	"math"
	"time"
)

// Decision is what [Limit.Reserve] decided for one event of a key.
type Decision struct {
	// OK is true when the event is taken: it may happen Wait after now,
	// and the key's state becomes TAT.
	OK bool
	// Wait is how long after now the event may happen, 0 for at once.
	// When the event is refused, it is the wait it would have had (the
	// longest Duration when that does not fit in one).
	Wait time.Duration
	// TAT is the key's theoretical arrival time after the call: the one
	// to keep when OK, and the one given when refused (a refusal changes
	// nothing).
	TAT time.Time
}

// Reserve decides the next event of a key whose theoretical arrival time
// is tat (the zero Time, or any time not after now, for an idle key),
// at now, for a caller that may wait up to maxWait for it (a negative
// maxWait is read as 0). It takes the event when its wait is at most
// maxWait; otherwise it takes nothing. The package doc gives the rules;
// the same arguments always give the same Decision.
//
// # Errors
//
// Reserve returns an error wrapping [ErrLimit], and a refusal, when l is
// invalid ([Limit.Check]).
//
// # Notes
//
// Times must lie within the years 1678 to 2262, where Unix nanoseconds fit
// an int64 ([time.Time.UnixNano]); the core computes in them exactly.
func (l Limit) Reserve(tat, now time.Time, maxWait time.Duration) (Decision, error) {
	if err := l.Check(); err != nil {
		return Decision{TAT: tat}, err
	}
	interval := uint64(l.Interval()) // ≥ 1ns: Per ≥ 1ms and Count ≤ 1e6
	start := now                     // max(tat, now)
	if tat.After(now) {
		start = tat
	}
	// ahead is start - now, how far the key's TAT is ahead of the clock:
	// exact in uint64 for any two times of the domain (their difference is
	// below 2^64 ns) and never negative.
	ahead := uint64(start.UnixNano()) - uint64(now.UnixNano())
	// wait = max(0, ahead - (B-1)·I), without computing (B-1)·I when it
	// exceeds ahead (it may not fit in 64 bits: 10^6 · 24h).
	var wait uint64
	if offset := uint64(l.EffectiveBurst() - 1); offset <= ahead/interval {
		wait = ahead - offset*interval
	}
	if wait > uint64(max(maxWait, 0)) {
		return Decision{Wait: saturate(wait), TAT: tat}, nil
	}
	return Decision{OK: true, Wait: time.Duration(wait), TAT: start.Add(time.Duration(interval))}, nil
}

// saturate converts nanoseconds to a Duration, the longest one when they
// do not fit.
func saturate(ns uint64) time.Duration {
	if ns > math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(ns)
}
