// Package lock defines the distributed lock the engine takes around every
// write of a workflow instance and around singleton background work, the
// retry policy for reaching the lock's backend, and the lock keys of
// SPEC §1.
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
// Acquire of [InstanceKey] with a deadline; an Acquire without one waits as
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
// one, so a holder that lost its lock cannot overwrite newer state (SPEC §6).
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
// The Redis implementation wraps a redsync mutex on "weft:lock:{" + key + "}"
// (the braces are a cluster hash tag, so both keys live in one slot) and
// fixes what redsync lacks: its Mutex is not safe for concurrent use (our
// lease serialises Extend and Release with a mutex), it returns ErrFailed on
// cancellation (our Acquire checks ctx and returns ctx.Err()), and it has no
// fencing token. The token comes from a counter next to the mutex,
// "weft:lock:{" + key + "}:fence", advanced by one Lua script that runs only
// if the mutex still holds this acquisition's random value:
//
//	if redis.call("GET", KEYS[1]) ~= ARGV[1] then return false end
//	local t = tonumber(redis.call("GET", KEYS[2]) or "0") + 1
//	local now = redis.call("TIME")
//	local us = tonumber(now[1]) * 1000000 + tonumber(now[2])
//	if us > t then t = us end
//	redis.call("SET", KEYS[2], t)
//	return t
//
// The ownership check must be in the same script as the increment: a holder
// that paused between SET NX and a separate INCR could otherwise take a
// larger token than the holder that replaced it. If the script finds the
// mutex gone, the acquisition is treated as lost and retried; if it fails
// transiently, the mutex is released and the error is transient. The fence
// key never expires (an expiry would reset the counter). Waiting for a held
// key polls with a short jittered interval, bounded by the lease's remaining
// TTL; Release detaches from ctx's cancellation and bounds the call with its
// own timeout.
package lock
