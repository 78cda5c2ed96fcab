// Package locallimit is the in-process rate limiter by key of the
// embedded mode: one node, so a key's state lives in this process's
// memory, and every decision is the GCRA of internal/ratelimit
// ([ratelimit.Limit.Reserve]) on a map of theoretical arrival times
// under one mutex (with the terms of each key's last granted event, which
// States shows).
//
//	l := locallimit.New(locallimit.Config{})
//	wait, ok, err := l.Reserve(ctx, "partner", ratelimit.Limit{Count: 10, Per: time.Second}, 5*time.Second)
//	// ok: act after wait; !ok: nothing was taken, the event would have waited wait
//	states, now, truncated, err := l.States(ctx, "step/", 100)
//	// the keys whose TAT lies ahead; states[i].Backlog(now): who waits for them
//
// # Why not golang.org/x/time/rate
//
// x/time/rate (v0.16.0) is a token bucket, the same algorithm seen from
// the other side, with explicit times in every method, so it was the first
// candidate: a *rate.Limiter per key, ReserveN(now, 1), and CancelAt(now)
// when the delay exceeds maxWait. It was not chosen, for reasons that each
// show at an edge this package must hold:
//
//   - A refused reservation must take nothing. Its only public way to
//     reserve within a maximum wait is ReserveN, then CancelAt when the
//     delay is too long: between the two another caller sees the token
//     taken, and the cancel gives back the token less the tokens of the
//     reservations made since, in float64, and nothing once the reserved
//     time has passed. (The conditional reservation this package needs,
//     reserveN with a maximum wait, is inside it, unexported.)
//   - A clock that goes back must not grant extra events. A reservation
//     at an earlier now makes it the last update's time, so the next call
//     at the later time is credited again with the tokens of the interval
//     in between: at 10/s with a burst of 10, over two seconds of
//     demand, one reservation with the clock a second back lets 39 events
//     through where the limit allows 30 (checked with v0.16.0).
//   - A Limit is an argument of every call. x/time/rate keeps the rate and
//     burst in the limiter: every call would have to compare and SetLimitAt
//     and SetBurstAt, and each changes the token count's last update.
//   - The decisions must be the cluster's. The Redis limiter runs the GCRA
//     in a Lua script (redis_rate's, with reservation); with the same core
//     here, both modes decide alike to the nanosecond, one model tests both
//     (internal/ratelimit/ratelimittest), and floats decide nothing.
//   - Memory: a key's GCRA state is one time (a map entry of its key and 8
//     bytes, and 24 more for the terms that States shows), against a
//     rate.Limiter of 80 bytes with its own mutex.
//
// # Memory
//
// A key whose theoretical arrival time has passed is idle, and idle is the
// same as unknown (package ratelimit), so forgetting it changes no
// decision. The limiter sweeps its idle keys when the map has grown to
// twice its size after the last sweep (and at least to 1,024 keys):
// amortized, each call pays a constant share, and the map holds at most
// about twice the keys whose TAT lay ahead at the last sweep — the keys in
// use within their last burst's refill time and maxWait.
//
// # Listing the keys
//
// States lists the keys whose TAT lies ahead, with the terms of their last
// granted event, for an operator to see who waits for which key
// ([ratelimit.KeyState.Backlog]). It copies the matching keys under the
// mutex, so it holds up Reserve for a pass over the map (about the keys
// in use, as above), and sorts them after.
//
// # Clock
//
// Config.Now is read once per call, under the mutex, so that decisions on
// a key see the clock in call order. Its wall time is what counts (the
// TAT is kept in Unix nanoseconds, as in Redis): a clock set back delays
// events and grants none, and one set forward makes keys idle early, as
// on the cluster's Redis.
package locallimit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
)

// minSweep is the size of the map below which the limiter never sweeps.
const minSweep = 1024

// defaultStates is how many states States returns when its max is not
// positive.
const defaultStates = 1000

// Config configures a Limiter. Its zero value is ready to use.
type Config struct {
	// Now is the limiter's clock. Defaults to time.Now.
	Now func() time.Time
}

// Limiter decides events by key in this process. It is safe for
// concurrent use; its zero value is not usable: call New.
type Limiter struct {
	now func() time.Time

	mu    sync.Mutex
	keys  map[string]entry // only keys whose TAT was ahead when written
	sweep int              // the map's size that triggers the next sweep
}

// entry is a key's state: its TAT, and the terms of its last granted
// event (which decide nothing; States shows them).
type entry struct {
	tat int64 // Unix nanoseconds
	lim ratelimit.Limit
}

// New returns a Limiter with no state.
func New(cfg Config) *Limiter {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Limiter{now: cfg.Now, keys: map[string]entry{}, sweep: minSweep}
}

// Reserve takes the next event of key under lim if it may happen within
// maxWait from now, and says how long to wait for it (0: at once). When
// the wait would be longer, it takes nothing (the key's state is
// unchanged) and returns ok false with the wait it would have had. A
// negative maxWait is read as 0.
//
// # Errors
//
// Reserve returns ctx.Err() when ctx is done, and an error wrapping
// [ratelimit.ErrLimit] when lim is invalid; either way it takes nothing.
func (l *Limiter) Reserve(ctx context.Context, key string, lim ratelimit.Limit, maxWait time.Duration) (wait time.Duration, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := lim.Check(); err != nil {
		return 0, false, fmt.Errorf("locallimit: reserve %q: %w", key, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	var tat time.Time
	if e, found := l.keys[key]; found {
		tat = time.Unix(0, e.tat)
	}
	d, err := lim.Reserve(tat, now, maxWait)
	if err != nil { // checked above
		return 0, false, fmt.Errorf("locallimit: reserve %q: %w", key, err)
	}
	if !d.OK {
		return d.Wait, false, nil
	}
	l.keys[key] = entry{tat: d.TAT.UnixNano(), lim: lim}
	if len(l.keys) >= l.sweep {
		l.forget(now.UnixNano())
	}
	return d.Wait, true, nil
}

// forget deletes the idle keys, those whose TAT is not after now, and
// sets the size of the next sweep.
func (l *Limiter) forget(now int64) {
	for k, e := range l.keys {
		if e.tat <= now {
			delete(l.keys, k)
		}
	}
	l.sweep = max(2*len(l.keys), minSweep)
}

// States returns the keys whose TAT is ahead of the limiter's now,
// starting with prefix (all when empty), sorted by key, at most max of
// them (max ≤ 0: 1000) and whether there were more; and the limiter's now
// (Config.Now, read once), against which [ratelimit.KeyState.Backlog] is
// read. The keys are those given to Reserve.
//
// # Errors
//
// States returns ctx.Err() when ctx is done.
func (l *Limiter) States(ctx context.Context, prefix string, max int) (states []ratelimit.KeyState, now time.Time, truncated bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, false, err
	}
	if max <= 0 {
		max = defaultStates
	}
	l.mu.Lock()
	now = l.now()
	ns := now.UnixNano()
	for k, e := range l.keys {
		if e.tat > ns && strings.HasPrefix(k, prefix) {
			states = append(states, ratelimit.KeyState{Key: k, Limit: e.lim, TAT: time.Unix(0, e.tat)})
		}
	}
	l.mu.Unlock()
	slices.SortFunc(states, func(a, b ratelimit.KeyState) int { return cmp.Compare(a.Key, b.Key) })
	if len(states) > max {
		states, truncated = states[:max:max], true
	}
	return states, now, truncated, nil
}
