// Package redislock is the [lock.Locker] of the cluster mode: a redsync
// (Redlock) mutex on one Redis or on a quorum of independent servers, with
// what redsync lacks: leases safe for concurrent use, ctx.Err() on
// cancellation, waiting for a held key, and a fencing token.
//
//	l, err := redislock.New(redislock.Config{Clients: []redis.UniversalClient{rdb}})
//	ls, err := l.Acquire(ctx, "workflow-instance:"+id, 8*time.Second)
//	// ... every store write carries ls.Token() ...
//	ls.Release(ctx)
//
// # Keys
//
// A lock key k lives in two Redis keys that share the cluster hash tag {k},
// so the layout works on Redis Cluster and one script can touch both:
//
//	weft:lock:{workflow-instance:42}        the redsync mutex (random value, PX ttl)
//	weft:lock:{workflow-instance:42}:fence  the fence counter
//
// A key that begins with a hash tag of its own, such as
// "{weft:3~17}workflow-instance:42", keeps that tag instead
// (weft:lock:{weft:3~17}workflow-instance:42 and its :fence), so that a
// lock can share the slot, and so the master, of the data it guards.
//
// # Acquiring
//
// An acquisition is one redsync attempt (SET NX PX on every server; it
// succeeds on a quorum len(Clients)/2+1 within the ttl's validity, and is
// undone otherwise) followed by the fencing token (below). Acquire polls a
// held key, starting at 1ms and doubling to 50ms with jitter; a release by
// the same Locker wakes its waiters at once, so contention within one node
// costs no polling delay. Polling is not a retry: only transient errors (a
// server, or too many of them, unreachable) use up the [lock.RetryPolicy],
// after which the error wraps [lock.ErrTransient]. A key taken on some
// servers while the others are unreachable counts as held, not as a
// transient error. Attempts run to their end even when ctx ends meanwhile,
// so that a half-made acquisition is undone rather than left for its TTL;
// between attempts Acquire returns ctx.Err() at once. Each server call of an
// attempt is bounded by a twentieth of the ttl (at least 50ms), which
// needs clients with ContextTimeoutEnabled to reach the socket. Every step
// (SET NX, the fencing rounds, Extend, Release) waits for the answer of
// every server, not only the first quorum (redsync's fail-fast mode):
// cancelling the calls still under way would leave stale mutexes and
// unextended leases on healthy servers, which a later failure of another
// server turns into a key nobody can take until its ttl. A hung server
// therefore costs each step the per-server timeout, and Release at most
// 1s. A hung server may also apply a SET NX after the attempt gave up on
// it; the key then stays taken there until its ttl, as Redlock allows.
//
// Extend and Release act on the servers holding this acquisition's random
// value and no other: an expired lease is never revived (and Extend refuses
// once Config.Now passes [lock.Lease.Expiry], which is the acquisition's
// start plus the ttl less Redlock's drift allowance). Extend bounds each
// server call like an acquisition does. Release runs with its own 1s
// timeout whatever ctx says, and logs instead of failing.
//
// # Fencing tokens
//
// Redlock keeps two holders apart only while every holder is timely. A
// holder that pauses (GC, a stopped VM, SIGSTOP) past its ttl loses the
// lock without knowing it; the next holder starts, and when the first
// resumes, both write. No lock with a TTL can prevent that. What prevents
// the damage is the token: each write to the store carries its lease's
// token and the store refuses a token below the one it has seen, so the
// resumed holder's writes, carrying an older token, are refused.
//
// The token is taken after the mutex by one Lua script per server that,
// only if the mutex still holds this acquisition's value, sets the counter
// to max(counter+1, the server's clock in Unix microseconds) and returns
// it. The ownership check and the increment are one atomic step: with a
// separate INCR, a holder that stalled between SET NX and INCR could take a
// larger token than the holder that replaced it. When the script finds the
// mutex gone on too many servers, the acquisition is undone and counts as
// "held" (the key expired under us, so someone may have it).
//
// On one server the counter is the token, and each acquisition takes a
// larger one: the script runs under the mutex, so acquisitions advance the
// counter one after another.
//
// On a quorum one INCR is not enough. Each server has its own counter, and
// the token is the maximum over the quorum that answered; a later
// acquisition's quorum may miss the one server that held that maximum. For
// instance counters (9, 5, 5): A takes {1, 2} and gets max(10, 6) = 10,
// leaving (10, 6, 5); B then takes {2, 3} and gets max(7, 6) = 7 < 10.
// (Clocks hide this most of the time, but the servers' clocks differ by
// milliseconds, which is far more than an acquisition takes.) So with
// several servers the script runs a second round with the token as a floor,
// raising the counter of a quorum to it before the lease is handed out.
// The argument:
//
//   - When A's Acquire returns token tA, a majority MA of servers has a
//     counter ≥ tA (round 2 succeeded there).
//   - A later acquisition B runs round 1 successfully on a majority RB. Two
//     majorities of the same servers intersect: some server s is in both.
//   - On s, A's round 2 came before B's round 1 (A had finished), so B's
//     round 1 on s returned at least tA+1, and tB, a maximum that includes
//     it, is > tA.
//
// The argument needs only that A's acquisition finished before B's began,
// which is the case fencing exists for: the paused holder got its lease
// before the next holder got its own, so the next holder's token is
// larger. (Acquisitions that overlap in time get no ordering promise from
// it; they can both succeed only when Redlock's timing assumptions fail
// during the acquisition itself.) The cost is one more round trip, to all
// servers in parallel, per acquisition; with one server it is skipped.
//
// The clock floor keeps tokens increasing when a counter is lost: a server
// restarted without its AOF, or a counter that expired. Counters expire
// 24h after their key's last acquisition, so that the many keys of
// finished instances do not stay in memory for ever; this is as safe as a
// lost counter, because the next token is at least the server's clock,
// which moved 24h past every earlier token (tokens outrun the clock only by
// the number of acquisitions within a microsecond). It holds as long as no
// server's clock goes back by more than the time since the key was last
// acquired.
//
// # Redis settings
//
// The servers need appendonly yes (a restart without the AOF forgets
// locks held at the time, and with one server lets a second holder in) and
// maxmemory-policy noeviction (an evicted mutex is a lock handed out
// twice). Tests start such servers with internal/redistest.
package redislock
