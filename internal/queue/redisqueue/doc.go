// Package redisqueue is the ready queue of cluster mode: a [queue.Queue] on a
// Redis stream read through one consumer group, shared by every node, so that
// work submitted to one node runs on all of them.
//
//	q, err := redisqueue.New(redisqueue.Config{Client: rdb, Consumer: nodeID})
//	if err != nil { ... }
//	defer q.Close()
//
// # Why a stream with a consumer group, not lists with a reliable move
//
// Both give at-least-once delivery. With lists, LMOVE/BLMOVE moves an item
// to a per-consumer processing list, and something must later find the
// lists of dead consumers: a registry of consumers, a heartbeat key per
// consumer, and a reaper that scans them and moves items back, with its own
// races against a consumer that was only slow. A consumer group keeps that
// bookkeeping inside Redis, atomically with the delivery: the pending
// entries list records, for every delivered and unacknowledged entry, its
// owner and how long it has been idle, and XAUTOCLAIM takes over entries
// idle longer than a bound in one command, without knowing which consumers
// exist. Ownership is also checkable (XPENDING), which the keep-alive below
// needs. The costs: XREADGROUP BLOCK cannot run inside a Lua script, so a
// Pop that had to wait takes two round trips (the blocking read, then the
// coalescing bookkeeping; a Pop that finds an entry waiting does both in
// one script), and acknowledged entries must be deleted (XDEL) for the
// stream not to grow.
//
// # Layout
//
// Two keys, both under the hash tag "{" + Prefix + "}" so that the scripts
// that touch both work on Redis Cluster:
//
//   - {Prefix}:ready, the stream. Each entry has the fields instance and
//     reason. The consumer group "workers" is created at ID 0 on first use,
//     so entries pushed before any node read are delivered too.
//   - {Prefix}:queued, a hash from instance id to the ID of its entry that
//     has not been popped yet. Push checks it and adds to it in one Lua
//     script with the XADD, which is how pushes coalesce and how capacity is
//     enforced; its length is [Queue.Depth]. An entry leaves it when popped,
//     by a compare-and-delete on the entry ID, so that an old entry never
//     removes a newer one of the same instance. Ack repeats that
//     compare-and-delete, which heals the hash if the node died between its
//     read and its bookkeeping; until then, a Push that finds the
//     instance's entry already pending in the group queues a new entry
//     rather than coalescing into one that only the visibility timeout
//     would hand out again.
//
// # Delivery
//
//   - At least once. A popped entry stays in the group's pending list until
//     Ack (XACK and XDEL). While the process that popped it is alive, a
//     keep-alive resets its idle time every VisibilityTimeout/3, so long
//     work (a long activity) is not handed to a second node. When the
//     process dies, or is paused for longer than VisibilityTimeout, the
//     entry's idle time passes VisibilityTimeout and the next Pop on any
//     node takes it over with XAUTOCLAIM. Such a redelivered item may run
//     twice; the instance lock and fencing make that safe.
//   - Pop waits in XREADGROUP BLOCK in short windows (at most 1s, and at
//     most VisibilityTimeout/4, and never past ctx's deadline) and checks
//     for entries to take over between windows. The read runs in its own
//     goroutine, so Pop returns as soon as ctx ends; an entry that arrives
//     after its Pop gave up is kept for the next Pop on this Queue (and
//     handed back to the stream by Close).
//   - Pop retries Redis errors (logging them) until ctx ends: a worker loop
//     that stopped on a Redis restart would stop the node.
//   - Push waits while Depth ≥ Capacity, polling (50ms, doubling to 1s)
//     and woken at once by pops on the same Queue, until ctx ends. Pushes
//     coalesce before the capacity check, as in memqueue.
//
// # Notes
//
//   - Consumer must be unique among live nodes (the node id): the
//     keep-alive and ownership checks go by consumer name.
//   - Close stops the background work. Deliveries handed out and not yet
//     acked are not released: they are redelivered after VisibilityTimeout,
//     as for a crashed node.
//   - Durability is Redis's: with appendonly yes (docs/cluster.md) queued
//     items survive a Redis restart; what an everysec fsync loses in a
//     crash is found again by the engine's sweeps (the store holds the work).
package redisqueue
