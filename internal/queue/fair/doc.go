// Package fair is the pure core of the ready queue's order: which queued
// instance is handed out next, so that a higher priority goes first and,
// within a priority, a key (a tenant) with a large backlog cannot starve a
// key with little. [Order] reads no clock and does no I/O: the push time
// comes in with each [Entry], for visibility only. The in-process queue
// (internal/queue/memqueue) is to keep an Order under its lock, and the
// Redis queue to implement the same order in Lua, tested against an Order
// as its model.
//
// # The order
//
// An entry has an ID (queued at most once), a priority p (1 highest … 5
// lowest), a key k and a weight w. The entries of one key at one priority
// are a lane, in push order; the lane has a weight, W(p,k). Each priority
// p has a ring R_p, the keys that have a lane at p, each once, in the
// order they last got one; the key at its head is the key whose turn it
// is, and U_p counts the pops that key has had in its turn.
//
//  1. Push(e): if e.ID is queued, nothing changes and Push reports false.
//     Otherwise e goes to the end of lane (p,k), W(p,k) becomes w, and if
//     the lane was empty, k goes to the end of R_p.
//  2. Pop: p is the highest priority whose ring is not empty (none: the
//     order is empty). Let k be the head of R_p. If U_p ≥ W(p,k), k's turn
//     is over: k moves to the end of R_p (alone, it stays) and U_p = 0; k
//     is now the new head. Pop takes the first entry of lane (p,k) and
//     adds 1 to U_p. If the lane is now empty, k leaves R_p and U_p = 0.
//  3. Remove(id): the entry leaves its lane, the others keep their order.
//     If the lane is now empty, k leaves R_p, and if k was the head,
//     U_p = 0.
//
// What follows from it:
//
//   - Priorities are strict: a priority is served only while every higher
//     one is empty. Fairness is between the keys of one priority.
//   - Within a priority, every round of the ring gives each key
//     min(W, its entries) consecutive pops; within a key, FIFO.
//   - A key that empties leaves the ring and forgets its weight; its next
//     push makes it rejoin at the end of the ring, with that push's
//     weight.
//   - The weight of a lane is the weight of its latest push, and the turn
//     compares with it at each pop (the turn ends lazily, at the pop after
//     the weight is reached): a push that lowers the head's weight to the
//     pops it has had ends its turn at the next pop; one that raises it
//     lengthens the turn. A weight belongs to a key at a priority: a push
//     at priority 1 leaves the key's weight at priority 3 alone.
//   - Because the turn ends lazily, a key that gets its first entry after
//     the head has used up its turn is served before the head's next
//     turn: key a (weight 1) alone pops once, key b arrives, the next pop
//     is b's.
//   - U_p belongs to priority p: pops at a higher priority in between
//     neither end nor reset the turn of a lower one. A removed entry is
//     not a pop and uses none of the turn.
//   - At is never read by the order.
//
// # Input
//
// The caller validates priorities (the API, the definition) and the
// order does not return errors: Push maps Priority 0 to weft.DefaultPriority
// and clamps any other value into 1…5 (below 1 is 1, above 5 is 5), and
// treats a Weight below 1 as 1. Pop and Remove return the entry as
// normalised, so the caller sees the priority it was served at. Clamping
// rather than panicking keeps a host serving when a validation is
// missing, and the Lua implementation does the same in three comparisons.
//
// # Costs
//
// Push, Pop and Remove are O(1) (amortised for Push: a map insert, and a
// slab that grows by doubling). Entries and lanes live in two slabs of
// structs linked by index, with free lists, so a steady state of pushes
// and pops allocates nothing, and the garbage collector scans two slices
// instead of a pointer per entry. Len, LenAt and Lane are O(1), Key is
// five lookups, Lanes is O(lanes). An order that empties after holding
// more than a few thousand entries releases its slabs and maps (Go maps
// never shrink). BenchmarkOrder measures a pop and a push, and a remove
// and a push, with 100,000 queued entries over 1, 100 and 10,000 keys: no
// allocation, and about the cost of the map operations on the IDs that
// any queue which coalesces by instance pays anyway.
//
// # In Redis
//
// The same state maps onto lists and hashes under one hash tag, so that
// one Lua script per call touches them all: per priority p, a list
// ring:p (the ring, head first) and a field of a hash used (U_p); per
// lane, a list lane:p:k of IDs; per priority, a hash weight:p from key to
// W(p,k); and one hash entries from ID to the entry (p, k, w, At), which
// is the duplicate check, Len (HLEN) and Remove's lookup. Push: HSETNX
// entries (0: report false), RPUSH lane:p:k, HSET weight:p, and RPUSH
// ring:p k when the lane's length is now 1. Pop: for p from 1 to 5,
// LINDEX ring:p 0 until one answers; if used ≥ weight, LMOVE ring:p
// ring:p LEFT RIGHT and used = 0 (then LINDEX again); LPOP the lane, HDEL
// entries, HINCRBY used; if the lane is now empty, LPOP ring:p, HDEL
// weight:p k and used = 0. Remove: HGET entries for p and k, HDEL, LREM
// lane:p:k 1 id, and if the lane is now empty LREM ring:p 1 k (resetting
// used if k was the head) and HDEL weight:p k. Push and Pop are O(1);
// Remove is O(the lane's length + the ring's length) through LREM, which
// suits its rare use (a deleted or cancelled instance); a sorted set per
// lane scored by a push sequence would make it O(log n). A lane's
// summary is LLEN, and LINDEX 0 with an HGET for its Oldest.
package fair
