// Package lock defines the distributed lock the engine takes around every
// write of a workflow instance and around singleton background work, and
// the retry policy for reaching the lock's backend. A key is any string;
// the engine names its own (internal/engine's InstanceLockKey and
// RefreshLockKey). Which operations take which lock, and why, is in
// docs/architecture.md, "Locks and fencing".
//
// Two implementations provide a [Locker]: lock/local, in-process, for the
// embedded mode, and (with the cluster mode) a Redis one built on redsync.
// Both run the same conformance suite, lock/locktest.
//
// # Waiting
//
// [Locker.Acquire] waits for the current holder for as long as ctx allows:
// until the holder releases, until the holder's lease expires, or until ctx
// ends, in which case it returns ctx.Err(). The engine therefore bounds every
// Acquire of an instance's key with a deadline; an Acquire without one waits as
// long as the key is held. [Locker.TryAcquire] never waits for a holder: it
// answers ok=false at once, which is what singleton workers (queue worker,
// recovery, timers sweep, definition refresh) need to skip their turn.
//
// Both retry only transient errors (the backend could not be reached), as
// the [RetryPolicy] says: by default at most 3 retries, 500 ms initial delay,
// doubling, with jitter. Waiting for a holder is not a retry and does not use
// up the policy. When the retries are exhausted the error wraps
// [ErrTransient]. The in-process implementation has no backend to lose, so
// it never returns ErrTransient and takes no policy.
//
// # Holding
//
// A holder whose work may outlast the TTL extends its lease well before
// [Lease.Expiry] (every TTL/3, say) and stops writing as soon as Extend
// returns [ErrLost]; a transient Extend error leaves the lease valid until
// Expiry at best. Release never fails from the caller's view: the TTL ends a
// lease whose release did not reach the backend, and the failure is logged.
//
// # Fencing tokens
//
// A lock with a TTL cannot by itself stop a holder that paused (GC, a
// stopped VM, a slow disk) past its TTL from writing after the next holder
// has started: the paused holder does not know it lost the lock. Redlock, and
// redsync which implements it, gives no protection against that. Every
// [Lease] therefore carries a fencing token ([Lease.Token]) that is strictly
// greater than the token of every earlier acquisition of the same key, by any
// holder on any node. The engine stores the token with the instance and every
// write is a compare-and-set that refuses a token smaller than the stored
// one, so a holder that lost its lock cannot overwrite newer state.
//
// Tokens are only comparable for the same key and are not consecutive. Every
// implementation keeps them at least the acquisition time in Unix
// microseconds, so tokens keep increasing when the counter is lost (a
// restart of the embedded host, a Redis that lost its data) as long as the
// clock did not go back by more than the downtime. Microseconds keep the
// values exact in Redis's Lua numbers (doubles, 53-bit integers).
//
// # The Redis implementation
//
// lock/redislock wraps redsync mutexes on "weft:lock:{" + key + "}" (the
// braces are a cluster hash tag) over one Redis or a Redlock quorum of
// several, and adds what redsync lacks: safety for concurrent use, ctx
// cancellation, and a fencing token. The token is set, only while the mutex
// holds this acquisition's value, by one Lua script to max(counter+1, the
// server's clock in µs); on a quorum a second round raises a majority's
// counters to the token before the lease is handed out, so any later
// majority sees it. Its package doc has the full argument, the key layout,
// the waiting policy and what fencing protects against that Redlock alone
// does not.
package lock
