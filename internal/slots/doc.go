// Package slots is the pure core of concurrency limits by key
// (docs/flow-control.md): who holds the slots of one key, who waits for
// one, and whom to cancel. A key is one value of a definition's
// `concurrency: {key: "${ input.customer }", limit: 2, policy: queue}`
// (customer-42), scoped by the engine to its workflow or step; a slot is
// held by an id: an instance id for a workflow's limit, an attempt id for
// an activity step's.
//
// Nothing here reads a clock, a store or the network. Each operation —
// Acquire, Release, Renew, Expire — takes a key's State, the caller's id,
// the Params in force (limit, policy, lease) and the time, and returns the
// new State and a Decision: the caller's Outcome, and whom the engine
// must wake (Promoted) and cancel (Cancel). The State passed in is never
// modified, and the same arguments give the same results. The engine
// keeps one State per key in its store and calls one operation per
// transaction; the cluster's Redis Lua script mirrors this package and is
// tested against it as a model ("Mirroring in Redis" below).
//
// # State
//
// A key's State lists its holders, in the order their slots were granted,
// each with when it was granted (Since), when its lease ends (Expiry) and
// whether it is being cancelled (Cancelling); and its waiters, first in
// line first, each with when it joined the line. An id appears at most
// once: it holds a slot, or waits, or is unknown to the key.
//
// # The sweep
//
// Every operation at now begins with the sweep's expiry step: each holder
// whose lease ended at or before now (Expiry not after now) loses its slot
// and is listed in Decision.Expired. A lease until 10s is held at 9.999s
// and lost at 10s — never earlier: a node that died holding slots frees
// them at its leases' expiry. Because every operation expires first, an
// operation's result does not depend on whether another call swept the
// key before it (a late Renew never revives a lease). The time is the
// caller's: nodes whose clocks disagree may call with a now earlier than
// an earlier call's, which only delays expiries until a call's now
// reaches them.
//
// Every operation ends with the sweep's promotion step: while fewer than
// Limit hold a slot, the first waiter gets one, with a lease until
// now+Lease, and is listed in Decision.Promoted; promotion never takes the
// holders past Limit. Acquire promotes before its own step too, so that
// waiters admitted by a raised limit or a freed slot go before a
// newcomer, and a waiter that Acquires again is Granted if its turn has
// come.
//
// # Operations
//
//   - Acquire(id): a holder has its slot again, its lease moved to
//     now+Lease (Granted); a waiter stays where it is (Waiting). Otherwise,
//     when fewer than Limit hold a slot (then nobody waits), id gets one
//     (Granted). Otherwise the Policy decides (below).
//   - Release(id): a holder's slot is freed (Released) or a waiter leaves
//     the line (Left), and waiters are promoted. Releasing an unknown id
//     changes nothing beyond the sweep (Unknown).
//   - Renew(id): a holder's lease moves to now+Lease (Renewed); a waiter
//     has none (Waiting); an id that holds no slot — its lease ended at or
//     before now, or it never had one — is Unknown: the slot is lost.
//   - Expire(): the sweep alone, for the keys no other call touches (the
//     engine finds them by Stats.NextExpiry).
//
// Acquiring twice is harmless: the second Acquire of a holder or a waiter
// changes nothing but the holder's lease, whatever the policy.
//
// # Policies
//
// When a newcomer cannot have a slot at once (Limit hold one, or someone
// waits):
//   - Queue (the default): it joins the end of the line: first come, first
//     served within the key.
//   - CancelNewest: it is refused (the engine cancels it); nothing else
//     changes.
//   - CancelOldest ("only the latest matters"): it joins the end of the
//     line, and of the key's members not being cancelled already — the
//     holders in grant order, then the waiters in line order, then the
//     newcomer, which is the order they arrived in — all but the newest
//     Limit are cancelled (Decision.Cancel, oldest first). A waiter
//     cancelled leaves the line at once. A holder cancelled is flagged
//     Cancelling and KEEPS its slot until it Releases it (or its lease
//     expires): a slot is never counted twice and the limit is never
//     exceeded while a cancellation is in flight. A holder flagged is
//     never listed again, by any later Acquire, so nobody is cancelled
//     twice. With limit 1, holder a and newcomers b then c: b waits and a
//     is cancelled; then c waits, b leaves the line and is cancelled (a,
//     listed already, is not listed again); when a releases, c runs.
//
// The newcomer of CancelOldest joins the end of the line, not its front:
// the waiters that remain ahead of it are among the newest Limit (all the
// older ones were cancelled), so they run too, and a line kept in arrival
// order is what makes "the oldest" the first holders and the front of the
// line, with no sequence numbers to keep.
//
// # Limits
//
// The limit is an argument of every call, not part of the State: a
// definition whose limit changes applies the new one from its next call.
// A raised limit promotes waiters at once; a lowered limit never evicts a
// holder: it stops grants and promotions until fewer than the new limit
// hold a slot. Several limits may apply to one key over time (two versions
// of a workflow, a changed definition); each call obeys its own.
//
// # Invariants
//
// After every operation with limit L (the fuzz test, FuzzSlots, checks
// each one after every step of random sequences of operations):
//   - No id appears twice, as a holder and a waiter or twice as either.
//   - If anyone waits, at least L hold a slot: no slot that L allows is
//     left idle while someone waits.
//   - A grant or promotion made by the call leaves at most L holders; a
//     holder is never removed but by its own Release or the expiry of its
//     lease. So, the holders taken in grant order, the i-th (from 1) was
//     granted by a call whose limit was at least i: with a constant limit
//     L, never more than L hold a slot.
//   - Every holder's lease ends after now.
//   - The line keeps its order: waiters leave it from the front
//     (promotion, CancelOldest) or by their own Release, and join it at
//     the end.
//   - An id is listed for cancellation at most once while it holds or
//     waits.
//
// # Waiters, and what the engine must do
//
// A waiter has no lease. A waiter holds nothing, and renewing the leases
// of thousands of waiting instances would cost the heartbeat more than
// all the running work; and a waiter whose instance is gone cannot wedge
// the line: when its turn comes it is promoted with a lease that nobody
// renews, so its slot returns at that lease's expiry. The engine makes
// even that cost rare:
//   - It Releases an id whenever the instance (or attempt) it stands for
//     ends, however it ends — completed, failed, cancelled, deleted,
//     migrated or exported away — whether it holds a slot or waits.
//   - It wakes every id of Decision.Promoted, and Releases at once one
//     whose instance or attempt no longer exists.
//   - It cancels every id of Decision.Cancel, and the Refused caller; a
//     cancelled holder Releases its slot when its cancellation has ended.
//   - It renews a holder's lease (Renew) from its heartbeat well before
//     Lease runs out, and stops the work of a holder whose Renew is
//     Unknown (its slot is lost; it may Acquire again, as a newcomer).
//   - It calls Expire for each key whose Stats.NextExpiry has passed, so
//     that a dead node's slots return to a key nobody else calls, and
//     deletes a State that is Empty.
//   - It chooses a Lease longer than the time to wake a promoted waiter
//     and to recover a dead node's instance, so that a recovered instance
//     that Acquires again finds its slot still held (Granted, not a
//     newcomer).
//
// # Mirroring in Redis
//
// The state and the algorithm map onto three Redis structures under one
// hash tag per key, changed by one Lua script per operation:
//   - a list of the holder ids in grant order (RPUSH on a grant; LREM on a
//     release or an expiry: holders are few, about the limit);
//   - a list of the waiter ids in line order (RPUSH to join; LPOP to
//     promote or to cancel the oldest; LREM when a waiter releases);
//   - a hash of each member's fields: "h:<id>" → "<since> <expiry>
//     <cancelling 0|1>" for a holder, "w:<id>" → "<since>" for a waiter,
//     times in Unix milliseconds (which also answers "is id a holder, a
//     waiter or neither" in O(1)).
//
// The script's steps are this package's: expire (read the holders' list
// and their fields, drop each whose expiry ≤ now), promote (for Acquire),
// the caller's step, promote. The key's next expiry goes to a sorted set
// of keys by next expiry, for the Expire sweep. The script is to be tested
// against this package as its model: the same random operations (as
// FuzzSlots makes them) through both, with times in whole milliseconds,
// comparing the States and Decisions after every step.
package slots
