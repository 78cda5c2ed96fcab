// Package redisqueue is the ready queue of cluster mode: a [queue.Queue] in
// Redis, shared by every node so that work submitted to one node runs on
// all of them, which keeps queued items in lists in the order of
// internal/queue/fair and delivers them through a stream's consumer group,
// in one shard or in several that the masters of a Redis Cluster share.
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
// The queue is one shard or several (Config.Shards), each a complete copy
// of the layout below under a hash tag of its own, so that the scripts,
// which touch many keys of a shard, work on Redis Cluster: one shard's
// tag is "{" + Prefix + "}" (the layout of the versions before shards),
// and with n > 1 shard q's is partition.Tags(Prefix + ":", n)[q], such as
// "{weft:queue:2~7}", whose slots fall in n equal ranges, so that the
// shards spread over the masters (Shards, below). {T} below is a shard's
// tag. Every key a script touches is one of its declared keys but the
// lanes the pop script reads the names of from a ring: it builds each from
// its ring's declared name, under the ring's tag.
//
//   - {T}:queued, a hash from instance id to its queued item (JSON of
//     [queue.Item], as first pushed): the coalescing check, the capacity
//     check, [Queue.Depth] (HLEN), and what the pop hands out. An item
//     leaves it when popped.
//   - {T}:lane:P:K, a list per priority P (1…5) and fairness key K:
//     the instances queued there, in push order.
//   - {T}:ring:P, a list per priority: the keys with a lane at P, the
//     key whose turn it is first.
//   - {T}:weight:P, a hash per priority from key to the weight of its
//     latest push there; {T}:used, a hash from priority to the pops
//     the head key has had in its turn.
//   - {T}:ready, the stream of delivered entries, each with the fields
//     instance and item (the JSON); the consumer group "workers" is
//     created at ID 0 on first use.
//   - {T}:wake, a stream of wake tokens, trimmed to about 64 (MAXLEN
//     ~, which drops whole stream nodes: at most 164 with Redis's default
//     stream-node-max-entries), read through the group "waiters" with
//     NOACK: each token wakes one waiting Pop, and none is ever pending.
//
// A lane's list disappears when it empties, and with it the key's place in
// the ring, its weight and the turn (as in fair.Order), so the keys are
// bounded by the lanes with items; drained, only the two streams remain.
//
// Push runs one script, on its instance's shard: unless the instance is
// queued (then it coalesces, changing nothing), and unless backpressure
// refuses it (below), it stores the item,
// appends the instance to its lane, puts the key at the end of its ring
// when the lane is new, sets the weight, and adds a wake token. Pop runs
// one script per shard it looks at: from the highest priority with a
// ring, the head key (moved
// to the end of the ring first if its turn is used up) gives the first
// instance of its lane; the item leaves the queued hash, a lane left empty
// leaves the ring and forgets its weight and turn, and the item is added
// to the stream and read for the consumer. Normalising a priority (0 is 3,
// others clamped into 1…5) and a weight (below 1 is 1) happens in Go, as
// fair.Entry's do. TestOrderMatchesModel holds the scripts to fair.Order,
// and to its rings, lanes and weights after every step;
// TestShardedOrderMatchesModel holds each shard to a fair.Order of its
// items.
//
// # Shards
//
// With one shard, every push, pop and ack of a deployment goes to the one
// master that serves the queue's slot. Shards divide that work: an item
// goes to shard partition.Of(its instance id, Shards), so every push for
// an instance goes to the same shard and coalescing by instance holds,
// and a Redis Cluster spreads the shards' tags over its masters.
//
//   - One slot per command. Every script and command touches the keys of
//     one shard, declared as its keys (the lanes aside, above). With
//     several shards the scripts carry the shebang "#!lua", under which a
//     Redis Cluster refuses a script's access to a key of another slot than
//     its declared keys', even when the same node serves both; without
//     it, Redis 7 allows that (TestShebangRefusesUndeclaredSlots), and a
//     key built wrong would go unnoticed on one node. So several shards need
//     Redis 7.0 or newer; one shard runs the scripts without the shebang,
//     as before, on Redis 6.2 too. A Redis out of memory refuses a script
//     under the shebang whole, so the scripts that only free or rewrite
//     (ack, keep-alive, the old version's popped bookkeeping) also carry
//     the flag allow-oom: a full Redis takes acks either way
//     (TestAckWhileRedisIsFull).
//   - The order holds within a shard. Each shard keeps the fair order of
//     its own items (priority, then weighted round-robin across keys, then
//     FIFO); items of different shards are not ordered against each other:
//     a Pop takes the next item of the first shard it looks at that has
//     one. So an item is popped within about Shards Pops of any one node
//     (the one that starts at its shard, below) once it heads its shard's
//     order, but may go after lower-priority items that the Pops starting
//     at other shards take there.
//   - Capacity is per shard: each shard has ceil(Capacity/Shards), and the
//     rule of Backpressure (below) holds within the shard of the pushed
//     item, with that capacity's fair share. Instances spread evenly
//     hold about Capacity items before pushes wait, and at most twice
//     Shards × ceil(Capacity/Shards); a push waits when its own shard is
//     full, however empty the others are.
//   - Every Pop takes from all the shards, fairly: each Pop starts at the
//     next shard in turn (a counter per Queue) and runs the pop script on
//     each shard from there until one gives an item, so a shard with
//     nothing queued costs one script and every shard is first in turn;
//     none starves.
//   - A shard whose Redis fails does not stop the others. Once a Pop's
//     call on it failed, the Queue's Pops leave it out (their pops, their
//     waits, their takeovers) while another shard answers, since a call to
//     an unreachable Redis can last its whole timeout (5s), and wait on the
//     wake streams of the others, whose pushes wake them at once. A look
//     at every shard (a Pop's first, or the periodic one, below) starts a
//     probe of it in the background instead, at most one a window, which
//     pops from it as a Pop would: an item it gets goes to the next Pop,
//     and the shard is back in the rotation once it answers. Its error is
//     logged once a window. Only when every
//     shard fails does a Pop try them all, backing off between tries (up
//     to 2s), as with one shard. TestShardDownLeavesTheOthersAwake pauses
//     one shard's master of a cluster.
//   - A waiting Pop blocks on one shard's wake stream, since XREADGROUP
//     BLOCK on several streams must be one slot: of the shards from its
//     start on, the first with the fewest of its Queue's waiting Pops, so
//     that the waiting Pops of a node spread over the shards, one a shard
//     while there are fewer Pops than shards. A push wakes a Pop waiting
//     on its shard at once. An item pushed to a shard no Pop waits on is
//     found by the Queue's periodic look at every shard (Delivery, below):
//     while a Pop of the Queue waits, within one wait window (at most 1s,
//     and at most VisibilityTimeout/4), the look's Shards scripts, and up
//     to a tenth of a second by which Redis ends a blocking read late (at
//     its default hz of 10). TestFewerWaitersThanShards measures it with
//     two waiting Pops and eight shards at a 250ms window: 285–345ms at
//     worst per shard over four runs on the loaded two-core machine.
//   - Taking over a dead consumer's entries (XAUTOCLAIM), the keep-alive,
//     Ack and the hand-back of Close are per shard, as with one: a
//     delivery remembers its shard.
//   - Changing Shards moves nothing: the items queued under the old number
//     stay under its tags, where the Pops of the new number do not look
//     (but in a shard whose tag both numbers share). The engine's sweeps
//     queue their instances again, since the store holds their work (due
//     timers, waiting inboxes, pending instances, expired leases), after
//     about a lease's TTL. Change it with every node stopped, as any
//     upgrade (docs/cluster.md), with the queue drained if that delay
//     matters.
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
//   - Pop runs the pop script at once, on every shard from its start
//     until one gives an item; when nothing is queued it waits for a wake
//     token (XREADGROUP BLOCK on one shard's wake stream, Shards above) in
//     short windows (at most 1s, and at most VisibilityTimeout/4, and
//     never past ctx's deadline), and runs the pop script on that shard
//     when a token comes. Between windows it checks for entries to take
//     over, and once per window per Queue one waiting Pop runs the pop
//     script on every shard without a token, which finds what no token
//     announced (a token lost with its connection, an item of a shard no
//     Pop waits on, an item of an old-version node). The wait runs in its own goroutine, so
//     Pop returns as soon as ctx ends; an item that the wait's pop takes
//     after its Pop gave up is kept for the next Pop on this Queue (and
//     handed back by Close, at the head of its lane).
//   - Pop retries Redis errors (logging them) until ctx ends: a worker loop
//     that stopped on a Redis restart would stop the node. With several
//     shards, one whose Redis fails is left to probes (Shards, above).
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
// so pushes from every node together keep to it. With several shards, C
// is each shard's capacity, ceil(Capacity/Shards), and the counts are the
// shard's (Shards, above).
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
//     default priority), where the stream alone ran 3. With several
//     shards, a Pop first runs the script on the empty shards it looks at
//     before the item's, each a round trip of 6 commands (XREADGROUP and a
//     LINDEX per priority): none when every shard has items, (Shards−1)/2
//     on average for the one item of an otherwise empty queue.
//   - A Pop that waits: three round trips (the pop script, the wait, the
//     pop script), as the stream alone took (its read, its wait, its
//     bookkeeping). Ack: one, 3 commands, unchanged.
//   - Idle: each waiting Pop holds a connection in a wait per window; per
//     Queue, one look per window (a pop script per shard) and one
//     XAUTOCLAIM per shard per VisibilityTimeout/4.
//   - BenchmarkPushPopAck, against the stream alone: 3.0 round trips per
//     item either way; 28 Redis commands per item instead of 13, each O(1)
//     and inside a script; about 1.8 times Redis's time in scripts per
//     item (INFO commandstats), and 1.2 to 1.4 times the wall time per
//     item on a loopback Redis sharing two cores with the benchmark. With 4
//     shards on one server: 4.5 round trips and 38.5 commands per item
//     (1.5 empty shards looked at per Pop, as above), 1.3 to 2 times the
//     wall time per item of one shard on that machine, about the ratio of
//     round trips; what shards buy is on a cluster, where each master
//     serves about 1/masters of them.
//
// # The old version
//
// The version before the fair order queued items as stream entries (fields
// instance and reason) and the queued hash held their entry IDs, under the
// one tag a queue of one shard still has (the shards of several are new
// keys, which no old-version node ever wrote). After an
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
//   - Every node must have the same Prefix and Shards: a node with another
//     number of shards pushes an instance to another shard (its items are
//     popped only by the nodes of its number, and a push for an instance
//     queued by a node of the other number queues it twice, which the
//     instance lock makes harmless).
//   - Close stops the background work. Deliveries handed out and not yet
//     acked are not released: they are redelivered after VisibilityTimeout,
//     as for a crashed node.
//   - Durability is Redis's: with appendonly yes (docs/cluster.md) queued
//     items survive a Redis restart; what an everysec fsync loses in a
//     crash is found again by the engine's sweeps (the store holds the work).
//     A script's writes are replicated and persisted together, so the lanes,
//     the hash and the stream never disagree after a restart.
package redisqueue
