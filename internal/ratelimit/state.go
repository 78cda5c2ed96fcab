package ratelimit

import (
	"math"
	"time"
)

// KeyState is one key's budget as a limiter keeps it: the terms of its
// last granted event and its theoretical arrival time (TAT). A key whose
// TAT has passed is idle and limiters forget it. Limiters list their
// keys' states (their States method) so that an operator can see who
// waits for a key's turns; [KeyState.Backlog] reads them.
type KeyState struct {
	// Key is the key as the limiter's callers gave it ("step/partner").
	Key string
	// Limit is the terms of the last event granted: each call brings its
	// own, and a refusal keeps none. The zero Limit when the limiter does
	// not know them (a Redis value written before the terms were kept).
	Limit Limit
	// TAT is the key's theoretical arrival time.
	TAT time.Time
}

// Backlog says, at now, how many granted events of the key are still to
// come — turns reserved by callers who wait: deferred step attempts,
// requests sleeping within their max_wait — and when an event asked for
// at now could happen (now when a turn is free).
//
// With B the burst and I the interval of s.Limit, the k-th event granted
// takes its time at TATₖ − B·I, TATₖ being the TAT it left (or at its
// call, when that is later), and the TATs left by the events granted
// since the key was last idle stand one interval apart. So the events
// still to come at now are those j = 0, 1, … back from the last with
// TAT − B·I − j·I > now:
//
//	ahead = max(0, ⌈(TAT − now)/I⌉ − B)
//	next  = max(now, TAT − (B−1)·I)   // now + the wait Reserve would give
//
// # Notes
//
// The count is exact when every event since the key was last idle was
// granted under s.Limit and the clock never went back. When the terms
// changed between calls it reads the whole backlog with the last terms:
// an approximation (events granted under a slower rate are counted as
// shorter turns). next is exact: now plus the wait [Limit.Reserve] would
// give a caller that may wait for ever.
//
// When s.Limit is not valid ([Limit.Check]), the terms are unknown:
// Backlog says 0 events ahead, and next is the latest the next event
// could be, max(now, TAT) (the time it would be with a burst of 1).
func (s KeyState) Backlog(now time.Time) (ahead int, next time.Time) {
	if !s.TAT.After(now) {
		return 0, now
	}
	if s.Limit.Check() != nil {
		return 0, s.TAT
	}
	i := uint64(s.Limit.Interval()) // ≥ 1ns for a valid Limit
	b := uint64(s.Limit.EffectiveBurst())
	// gap = TAT − now > 0, exact in uint64 for any two times of the
	// domain, as in Reserve.
	gap := uint64(s.TAT.UnixNano()) - uint64(now.UnixNano())
	turns := gap / i // ⌈gap/I⌉
	if gap%i != 0 {
		turns++
	}
	if turns > b {
		ahead = int(min(turns-b, math.MaxInt))
	}
	// TAT − (B−1)·I when it is after now, i.e. when B−1 < ⌈gap/I⌉: then
	// (B−1)·I < gap, and the result lies between now and TAT.
	next = now
	if offset := b - 1; offset < turns {
		next = time.Unix(0, int64(uint64(s.TAT.UnixNano())-offset*i)).In(now.Location())
	}
	return ahead, next
}
