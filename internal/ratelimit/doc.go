// Package ratelimit is the vocabulary and the pure core of rate limits by
// key (docs/flow-control.md): a Limit (so many events per period, with a
// burst), and the generic cell rate algorithm (GCRA) that decides when
// the next event of a key may happen. Nothing here reads a clock, a store
// or the network: the limiters that keep a key's state — in process on
// the embedded store (internal/ratelimit/locallimit), in Redis for a
// cluster (internal/ratelimit/redislimit) — decide with this package's
// rules, and its model is what their conformance suite
// (internal/ratelimit/ratelimittest) holds them to.
//
// # The algorithm
//
// A key's whole state is one time, its theoretical arrival time (TAT):
// when the key would be idle again had its events come evenly spaced by
// the Limit's Interval. A key without state, or whose TAT has passed,
// is idle; the two are the same, so a limiter forgets a key once its TAT
// is past and its memory stays bounded by the keys in use. For one event
// at now, with I the Interval and B the burst ([Limit.Reserve]):
//
//	tat   = max(TAT, now)
//	at    = max(now, tat + I - B·I)   // when the event may happen
//	TAT'  = tat + I                   // if the event is taken
//
// So after a quiet period B events go at once, and then one every I; over
// any window of length T, at most B + T/I events happen (a steady demand
// gets exactly that). This is the GCRA of github.com/go-redis/redis_rate
// v10 (its AllowN with a cost of 1), which the Redis limiter's script is
// derived from, and it is equivalent to a token bucket of B tokens refilled
// every I; the TAT is the one number a token bucket would need two for
// (tokens, and when they were counted).
//
// # Reservation
//
// redis_rate only allows or denies: a denied caller asks again later, and
// every denied caller is told about the same retry time, so waiters that
// sleep until it stampede. Reserve instead takes the event at its time
// when the caller may wait that long (maxWait), and says how long to wait:
// concurrent callers get distinct slots, one Interval apart, and act at
// their own times. A reservation that would wait longer than maxWait is
// refused and takes nothing: the key's TAT is unchanged, so refusals cost
// the others nothing.
//
// # Changes and clocks
//
// The Limit is an argument of every call, not part of the state: a Limit
// changed between calls applies from the next call, which spaces its
// event by the new Interval and Burst from where the key's TAT stands
// (events already granted keep their times). A clock that goes back does
// not grant extra events: TAT never moves back, and an earlier now only
// lengthens the wait; the bound above holds in the times the clock read.
// A clock that jumps forward makes the key idle, as real time passing
// would.
//
// # What a key shows
//
// A limiter lists the keys whose TAT lies ahead (their States method) as
// KeyStates: the TAT and the Limit of the last granted event. From them
// [KeyState.Backlog] derives, at a given now, what an operator asks: how
// many granted events are still to come — the callers waiting for their
// turns — and when an event asked for then could happen. With B and I
// those of the Limit, an event happens B·I before the TAT it left (or at
// its call, when later), and the events granted since the key was last
// idle left TATs one interval apart, so the count is ⌈(TAT − now)/I⌉ − B
// when positive: exactly, as long as the terms did not change in between
// (it reads the backlog with the last ones otherwise).
//
// # Exactness
//
// Times are integer Unix nanoseconds (between the years 1678 and 2262) and
// the Interval is Per/Count rounded down to a nanosecond, so the core has
// no rounding of its own and the Redis script, which keeps the TAT as
// Unix nanoseconds too, makes the same decisions for waits within 104
// days (where Lua's doubles stop being exact integers of nanoseconds).
package ratelimit
