// Package redisqueue is the ready queue of cluster mode: a [queue.Queue] in
// Redis, shared by every node so that work submitted to one node runs on
// all of them, which keeps queued items in lists in the order of
// internal/queue/fair and delivers them through a stream's consumer group.
//
//	q, err := redisqueue.New(redisqueue.Config{Client: rdb, Consumer: nodeID})
//	if err != nil { ... }
//	defer q.Close()
//
// # Why lists for the order, and a stream with a consumer group for delivery
//
// The order (internal/queue/fair: by priority, then weighted round-robin
// across fairness keys, then first in, first out) is not one FIFO, so the
// queued items cannot wait in a stream: they wait in lists and hashes that
// are fair/doc.go's "In Redis" layout, which one Lua script reads and
// changes at a time.
//
// A popped item goes into a stream read through one consumer group, which
// gives at-least-once delivery with less machinery than lists: with
// lists alone, LMOVE moves
// an item to a per-consumer processing list, and something must later
// find the lists of dead consumers: a registry of consumers, a heartbeat
// key per consumer, and a reaper that scans them and moves items back,
// with its own races against a consumer that was only slow. A consumer
// group keeps that bookkeeping inside Redis, atomically with the delivery:
// the pending entries list records, for every delivered and
// unacknowledged entry, its owner and how long it has been idle, and
// XAUTOCLAIM takes over entries idle longer than a bound in one command,
// without knowing which consumers exist. Ownership is also checkable
// (XPENDING), which the keep-alive below needs. The pop script adds the
// item to the stream and reads it for its consumer (XREADGROUP without
// BLOCK, which a script may run) in the step that takes it from its lane,
// so an item is never outside both, and the stream holds only delivered
// entries, the pending ones (but for an old version's, below). The costs: since nothing waits in the stream,
// an idle Pop cannot block on it, and waits on a second stream of wake
// tokens instead (below); acknowledged entries must be deleted (XDEL) for
// the stream not to grow; and the scripts run more commands than a stream
// alone would (Costs).
//
// # Layout
//
// Every key is under the hash tag "{" + Prefix + "}", so that the scripts,
// which touch many of them, work on Redis Cluster; the lanes' names are
// computed inside the pop script, which a cluster allows within one slot.
//
//   - {Prefix}:queued, a hash from instance id to its queued item (JSON of
//     [queue.Item], as first pushed): the coalescing check, the capacity
//     check, [Queue.Depth] (HLEN), and what the pop hands out. An item
//     leaves it when popped.
//   - {Prefix}:lane:P:K, a list per priority P (1…5) and fairness key K:
//     the instances queued there, in push order.
//   - {Prefix}:ring:P, a list per priority: the keys with a lane at P, the
//     key whose turn it is first.
//   - {Prefix}:weight:P, a hash per priority from key to the weight of its
//     latest push there; {Prefix}:used, a hash from priority to the pops
//     the head key has had in its turn.
//   - {Prefix}:ready, the stream of delivered entries, each with the fields
//     instance and item (the JSON); the consumer group "workers" is
//     created at ID 0 on first use.
//   - {Prefix}:wake, a stream of wake tokens, trimmed to about 64 (MAXLEN
//     ~, which drops whole stream nodes: at most 164 with Redis's default
//     stream-node-max-entries), read through the group "waiters" with
//     NOACK: each token wakes one waiting Pop, and none is ever pending.
//
// A lane's list disappears when it empties, and with it the key's place in
// the ring, its weight and the turn (as in fair.Order), so the keys are
// bounded by the lanes with items; drained, only the two streams remain.
//
// Push runs one script: unless the instance is queued (then it coalesces,
// changing nothing), and unless backpressure refuses it (below), it stores
// the item,
// appends the instance to its lane, puts the key at the end of its ring
// when the lane is new, sets the weight, and adds a wake token. Pop runs
// one script: from the highest priority with a ring, the head key (moved
// to the end of the ring first if its turn is used up) gives the first
// instance of its lane; the item leaves the queued hash, a lane left empty
// leaves the ring and forgets its weight and turn, and the item is added
// to the stream and read for the consumer. Normalising a priority (0 is 3,
// others clamped into 1…5) and a weight (below 1 is 1) happens in Go, as
// fair.Entry's do. TestOrderMatchesModel holds the scripts to fair.Order,
// and to its rings, lanes and weights after every step.
//
// # Delivery
//
//   - At least once. A popped item's entry stays in the group's pending
//     list until Ack (XACK and XDEL). While the process that popped it is
//     alive, a keep-alive resets its idle time every VisibilityTimeout/3,
//     so long work (a long activity) is not handed to a second node. When
//     the process dies, or is paused for longer than VisibilityTimeout, or
//     lost the pop script's reply, the entry's idle time passes
//     VisibilityTimeout and the next Pop on any node takes it over with
//     XAUTOCLAIM, with its item (priority, key and weight too). Such a
//     redelivered item may run twice; the instance lock and fencing make
//     that safe.
//   - Coalescing is by instance while the item is queued: once popped, the
//     instance is no longer in the queued hash, so a push for it (while the
//     popped one runs, or after its node died) queues a new item, in that
//     push's order.
//   - Pop runs the pop script at once; when nothing is queued it waits for
//     a wake token (XREADGROUP BLOCK on the wake stream) in short windows
//     (at most 1s, and at most VisibilityTimeout/4, and never past ctx's
//     deadline), and runs the pop script again when a token comes. Between
//     windows it checks for entries to take over, and once per window per
//     Queue one waiting Pop runs the pop script without a token, which
//     finds what no token announced (a token lost with its connection, an
//     item of an old-version node). The wait runs in its own goroutine, so
//     Pop returns as soon as ctx ends; an item that the wait's pop takes
//     after its Pop gave up is kept for the next Pop on this Queue (and
//     handed back by Close, at the head of its lane).
//   - Pop retries Redis errors (logging them) until ctx ends: a worker loop
//     that stopped on a Redis restart would stop the node.
//
// # Backpressure
//
// Push waits while the rule of [queue.Admits] refuses its item, as in
// memqueue: with C the Capacity, the push script admits an item while the
// queued hash holds fewer than C items, or while the item's lane
// (lane:P:K, its priority and fairness key) holds fewer than
// [queue.FairShare](C) = max(1, C/100) items and the hash fewer than 2×C.
// At the default Capacity of 1024 a lane's share is 10 and the bound 2,048
// items; at the host's default of 10,000 (host/node's QueueCapacity), 100
// and 20,000. So a tenant with few items queued is not held back by
// another tenant's backlog, and Redis never holds more than twice the
// capacity in the queue (but for the items Close hands back, which were
// counted when first pushed and are not counted again). The rule is
// decided in the one push script, atomically with the counts it reads,
// so pushes from every node together keep to it.
//
//   - Pushes coalesce before any capacity check, so a push for a queued
//     instance never waits.
//   - A refused Push waits, polling (50ms, doubling to 1s) and woken at
//     once by pops on the same Queue, until ctx ends, running the push
//     script again at each look: a push of a lane below its share that
//     waited at 2×C is admitted at its first look after a pop (at once
//     after a pop on its own Queue, within a poll after one on another
//     node), one of a lane at its share once the hash holds fewer than C
//     items or its lane fewer than its share.
//   - Every node must have the same Capacity for the rule to be the same
//     on every node; a node of a version before this rule refuses every
//     push at C, whatever its lane.
//
// # Costs
//
//   - Push: one round trip; its script runs 6 commands (HGET, HLEN, HSET,
//     RPUSH, HSET of the weight, XADD of a token), 7 when the lane is new
//     (RPUSH of the ring), where a push onto the stream alone ran 4. When
//     the queue holds Capacity items or more, the rule reads the lane's
//     LLEN, one command more (O(1)); a refused push runs 2 or 3.
//   - Pop of a queued item: one round trip; its script runs XREADGROUP
//     (for old-version entries), a LINDEX per priority down to the first
//     with items, 2 HGETs (the turn, the weight), LMOVE and LINDEX when a
//     turn ends, LPOP and LLEN of the lane, an HSET of the turn or 3
//     commands to drop an emptied lane, HGET and HDEL of the item, XADD and
//     XREADGROUP: 11 to 19 commands (15 for the last item of a lane at the
//     default priority), where the stream alone ran 3.
//   - A Pop that waits: three round trips (the pop script, the wait, the
//     pop script), as the stream alone took (its read, its wait, its
//     bookkeeping). Ack: one, 3 commands, unchanged.
//   - Idle: each waiting Pop holds a connection in a wait per window; per
//     Queue, one pop script per window and one XAUTOCLAIM per
//     VisibilityTimeout/4.
//   - BenchmarkPushPopAck, against the stream alone: 3.0 round trips per
//     item either way; 28 Redis commands per item instead of 13, each O(1)
//     and inside a script; about 1.8 times Redis's time in scripts per
//     item (INFO commandstats), and 1.2 to 1.4 times the wall time per
//     item on a loopback Redis sharing two cores with the benchmark.
//
// # The old version
//
// The version before the fair order queued items as stream entries (fields
// instance and reason) and the queued hash held their entry IDs. After an
// upgrade, the pop script first delivers any stream entry no consumer has
// read, with that version's bookkeeping (the compare-and-delete of the
// hash on the entry ID, repeated by Ack and, for an entry taken over, by
// the taking Pop, in case its reader died before doing it), so those
// items go before the items queued since, and a push for such an instance
// coalesces into its entry unless the entry is already pending (its reader
// died before its bookkeeping: the push queues the item anew rather than
// wait for the visibility timeout). During a rolling upgrade, an old node's
// pushes are found by a new node's pops (at the latest within a window),
// an old node pops no new item (a new item is never in the stream
// unread), and an old node's push for an instance queued by a new node
// coalesces into it.
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
//     A script's writes are replicated and persisted together, so the lanes,
//     the hash and the stream never disagree after a restart.
package redisqueue
