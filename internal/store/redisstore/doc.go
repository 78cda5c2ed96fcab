// Package redisstore is the [store.Store] of the cluster mode: every node
// keeps its instances, stimuli, definitions and plugin metadata in one
// Redis (go-redis v9), so that any node can run, resume or recover any
// instance. It passes the conformance suite internal/store/storetest, with the
// same semantics as the embedded internal/store/embedded.
//
// # Atomic transitions
//
// Every write that reads before it writes is one Lua script (go-redis
// runs it with EVALSHA and loads it on NOSCRIPT): Commit (the rev
// compare-and-set, the fence check, the delivered stimulus, the plugin
// pins, then the instance, its indexes (its search attributes' among
// them), history, bookmarks, timers, inbox, heartbeats and the messages it
// sends), DeleteInstance,
// RenewLeases (one script per batch: one round trip), Deliver,
// EnqueueStimulus, ExpireStimuli, PutTape, PutDefinition, DeleteDefinition,
// PutPlugin, DeletePlugin (the in-use check and the delete), PutGrants
// (the comparison with the stored document and the revision),
// DeleteGrants, PauseWorkflow and UnpauseWorkflow (the pause and the
// catalog generation), RegisterSearchAttributes (every name checked, then
// the new ones registered), CreateSchedule and UpdateSchedule (the revision
// compare, the record, its wake index entry and the events appended and
// trimmed), DeleteSchedule, and the batch writes (CreateBatch, UpdateBatch,
// AddBatchItems, ApplyBatchItems, DeleteBatch: see "Batches" below).
// Redis runs a script alone, so no other client sees a half-done
// transition. UpdateSlots is the exception: it runs the Go
// operation of internal/slots on a window of the key's records read under
// WATCH, and writes the changes in one MULTI/EXEC, which Redis applies
// whole, and only if no watched record changed since (slots.go).
//
// Scripts do every check before their first write and refuse by returning,
// so a refused write changes nothing. Redis does not roll a script back,
// so the other way a script could stop midway matters too: running out of
// memory. Redis refuses a script's first write when it was over maxmemory
// as the script started, and lets a script that has written finish; our
// scripts therefore fail whole or complete (a test injects the fault with
// CONFIG SET maxmemory). Run Redis with maxmemory-policy noeviction: an
// evicting policy would drop store keys.
//
// Times are the store's clock (Config.Now) read in Go and passed to the
// scripts as arguments; Redis's TIME decides nothing, so the nodes' clocks
// and the tests' fake clock rule as they do for embedded.
//
// # Redis Cluster: one hash slot per store
//
// Every key of a store carries the same hash tag, "{" + Prefix + "}", so a
// store lives in one slot, on one shard. That is what makes the scripts
// legal on a cluster: a Commit touches the instance's keys and global
// indexes (by creation time, workflow, status, lease expiry, due time,
// bookmark event and key, delete-after, stimulus queue, expiry and dead
// letters), and Redis Cluster runs a script only on keys of one node,
// refusing MULTI blocks and commands over several slots. Scripts build
// most key names from the prefix: KEYS names one key of the store, which
// routes the call to the node of the store's slot, so the undeclared keys
// are there too. A test runs the conformance suite through a ClusterClient on a cluster
// node and checks that every key it wrote hashes to its store's slot.
//
// The trade-off: a store does not spread over shards, so a cluster adds
// failover, not write throughput, to one store. The alternative, one tag
// per instance, would need the indexes either in every instance's slot
// (no global listing) or in other slots (no atomic Commit, so a crash
// between the instance and its index entries would leave them out of step,
// and recovery would have to repair them). One Redis core runs tens of
// thousands of these scripts a second (see the benchmark), far above what
// the engine needs from one store; several stores (prefixes) land in
// different slots and so on different shards.
//
// # Partitions
//
// Partitioned (partitioned.go) divides a store into P partitions, each a
// Store of this package under a hash tag of its own (partition.Tags)
// holding the instances whose ids hash to it, and a catalog, a Store under
// the store's own tag holding the rest: a Redis Cluster spreads the
// partitions over its masters. The scripts are the same in every role;
// role.go says what differs, and the router's doc the protocols it runs
// where one call spans two stores (the outbox, stimulus reservations, the
// catalog generation copied into the partitions, the plugin delete's
// barrier).
//
// # Durability
//
// The store assumes AOF (appendonly yes); Open logs a warning when
// CONFIG GET appendonly says no. What an acknowledged write survives:
//
//   - appendfsync always: Redis fsyncs the AOF before it answers, so an
//     acknowledged write survives a crash of Redis and of the machine.
//   - appendfsync everysec: Redis writes the AOF before it answers and
//     fsyncs it every second, so an acknowledged write survives a crash of
//     the Redis process (the kernel has it) but a machine crash or power
//     loss can lose about the last one to two seconds.
//   - Replication is asynchronous: a failover to a replica can lose writes
//     the old primary acknowledged. Fencing still holds (a lost write is
//     lost whole, never half applied), but the API's promise that a 201
//     means durably stored holds for a failover only with
//     Config.WaitReplicas: every write script is then followed, on its
//     connection, by an INCR of P sync and WAIT, and is answered only
//     once that many replicas have it (or what a refusal refused
//     against); a shortfall after Config.WaitTimeout is an error matching
//     store.ErrNotDurable and weft.ErrUnavailable (wait.go). Lease
//     renewals are not waited for: one that a failover loses hands an
//     instance over early, under a higher fencing token. Barrier waits
//     the same way for what a read found (the engine calls it, through
//     BarrierOf, before it answers a retried start from the instance its
//     first attempt made).
//
// Redis logs a script's effects as one MULTI/EXEC block, and on load drops
// a block truncated by a crash, so a restart never finds half a Commit.
//
// # Throughput
//
// `go test -bench . ./internal/store/redisstore/` starts its own servers.
// Measured on the 2-core reference machine while other work ran on it
// (load average about 6, so the spread is wide), 50 writers creating
// instances with about 1 KiB of vars and one history event
// (BenchmarkCommitParallel, the workload of the embedded store's benchmark):
//
//	appendfsync always     12,200–14,900 commits/s
//	appendfsync everysec    9,700–11,900 commits/s
//	embedded (same run)     2,100–7,700 commits/s
//
// The two fsync policies do not differ measurably: with always, Redis
// fsyncs once per event-loop turn for all the clients served in it, a
// group commit like the embedded store's; the CPU of the shared machine is the
// limit. Every Commit is one script (one round trip); INFO commandstats
// counts 6 Redis commands for a create and 11 for an update that moves
// the instance between status indexes and sets its lease (8 and 11 in
// schema 2, 9 and 14 in schema 1).
//
// # Layout
//
// P is "{" + Prefix + "}". Times in keys and members are 16 hex digits of
// the Unix nanoseconds with the sign bit flipped (fixed width, so byte
// order is time order, and exact); strings inside members are
// tuple-encoded (0x00 escaped as 0x00 0xFF, each string ended by
// 0x00 0x01), so byte order is tuple order and event "a" with key "bc"
// never meets event "ab" with key "c". Every index but the leases' is a
// sorted set with score 0 read with ZRANGEBYLEX (the orders below that a
// score keeps say so); nothing uses KEYS or SCAN.
// The leases' index has the expiry as score so that a renewal updates a
// member in place: ExpiredLeases compares the exact expiry (from P l) of
// the members whose score is the rounded-up now. A slot key's line is in
// arrival order, its score a sequence number (the nodes' clocks may
// disagree).
//
//	P schema              "3" (Open migrates a store of schema 1, whose leases were
//	                      fields of the instance hashes and indexed in P lx, and
//	                      whose index memberships were listed in a set P x:<id>,
//	                      and of schema 2, which also indexed every instance in
//	                      P ix:all and each workflow's in P ix:w:<wf>)
//	P i:<id>              hash: doc (JSON without the store's fields), state, rev, fence,
//	                      ct, ut (times), st (status), wf, term, lh ("1" if P l
//	                      holds its lease: readers of the many instances without
//	                      one read nothing else), pn (pinned plugins: each name's
//	                      length, ":" and the name), da (delete-after time), ws
//	                      (when its inbox started waiting: set exactly while the
//	                      inbox holds a message), hb ("1" once an attempt's
//	                      first heartbeat went into P e:<id>: the commit that
//	                      ends the instance deletes e: only when hb or lh is set;
//	                      lh covers the heartbeats of builds before hb), sa (the
//	                      search attributes it indexed: each name and encoded
//	                      value as len ":" string, sorted; absent for none)
//	P l                   leases, one hash for all instances: id → expiry (time),
//	                      "1" if terminal else "0", len(boot) ":" boot node
//	P h:<id>              list of history events; an event's Seq is its place
//	P b:<id>, P t:<id>    sets of the instance's members of bk and due
//	P m:<id>              inbox hash: message id → "<seq>|<message>"
//	P mw                  inboxes holding messages, by when they began to: time (the
//	                      instance's ws) + id (WaitingInboxes)
//	P e:<id>              heartbeats hash: token → heartbeat
//	P r:<id>, P a:<id>    recorded attempts (tapes.go): hashes of the tapes' summaries
//	                      (JSON of weft.TapeRecord) and of their bytes, both by step
//	                      path, 0x00, exec, 0x00, attempt; deleted with the instance
//	P rp:<plugin>         the plugin's tapes, of every instance: member the instance id's
//	                      length, ":", the id and the tape's field in r:, score the
//	                      recording time in Unix milliseconds (FindTapes: newest first);
//	                      an instance's entries follow from its summaries in r:
//	P ix:s:<status>, ix:ws:<status>:<wf>
//	                      instances by (created, id): member time + id; an
//	                      instance's memberships here and in u: and rx follow
//	                      from its hash (ct, wf, st, term, pn, da), so a Commit
//	                      or a delete removes exactly the entries it made. A
//	                      listing without a status merges the status
//	                      indexes (of all workflows or of one): an instance is
//	                      in exactly one, and a create writes two entries, not
//	                      one more per filter a listing may use
//	P ix:a:<name>         instances by the value of search attribute name: value +
//	                      created time + id (an instance's entries follow from
//	                      its sa field and ct). Values: a string or keyword
//	                      tuple-encoded; a number as 16 hex digits of its
//	                      float64 bits, all inverted when negative, else with
//	                      the sign bit set (-0 as 0; NaN and infinities
//	                      refused); a time as in every member; a bool "0" or
//	                      "1". A keywords attribute has one entry per keyword
//	P sr                  search attributes registered: name → type ":" workflow
//	P lz                  leases of non-terminal instances: member id, score the
//	                      expiry in Unix microseconds rounded up (exact to 2^53),
//	                      so that renewing a batch of leases is one
//	                      HMGET, ZADD and HSET per 2,000 ids
//	P u:<plugin>          instances pinning the plugin, non-terminal only: id
//	P rx                  terminal instances with a DeleteAfter, by it: time + id
//	P bk                  bookmarks: (event, key, instance, step) + bookmark
//	P due                 timers: time + (instance, id) + timer
//	P s:<id>              stimulus hash: doc, state, ex (expiry), set (settled),
//	                      to, out, qm (its queue member while queued), rv (while a
//	                      partition's commit has it reserved: deadline (time) +
//	                      instance; the stimulus is then in neither sq nor sx)
//	P sv                  reserved stimuli by deadline: time + id (stimreserve.go)
//	P sq                  queue: (name, key) + 20-digit sequence + id
//	P sx, P sd, P sf      queued by expiry, dead by death, settled by forget time: time + id
//	P mseq, P sseq, P pseq   counters: inbox Seq, queue order, plugin order
//	P sync                counter each write waited for (Config.WaitReplicas) increments
//	                      after its script, so that its WAIT covers what it read
//	P d:<name>            definition versions: v:<n> → definition, h:<n> → hash
//	P dl, P dseq, P dn    latest version and highest version ever per name; names
//	P p:<name>, P o:<name>   plugin versions: version → record; order of becoming current
//	P pn                  plugin names
//	P g:<name>            grants of a plugin name: hash doc, rev, at (time)
//	P gseq, P gn          highest grants revision ever per name; names with grants
//	P sc:<id>             schedule hash: doc (JSON of its document, state, note and
//	                      wake), rev, ct, ut (times), wx (the wake's time in P sw, ""
//	                      for none), es (the Seq of its last event)
//	P sh:<id>             list of the schedule's last weft.MaxScheduleEvents events:
//	                      an event's Seq is es less its distance from the end
//	P sn, P sw            schedules by id; schedules with a wake by (wake, id): time + id
//	P cg                  the catalog's generation, "<order, 15 digits>.<random>"
//	                      (bumpGeneration), set with every change of definitions,
//	                      plugins or workflow pauses (a store's first is random,
//	                      of order 0); a partition's is a copy, only ever raised
//	                      (by the router's copy, or a create that read a later
//	                      one); a plugin delete's barrier is an order handed out
//	                      to the partitions and never set in the catalog
//	P cgn                 counter of the generations' orders
//	P partitions          (catalog) the number of partitions, fixed at creation;
//	                      the schema key of a partitioned store's catalog is "3p",
//	                      "3>3p" while OpenPartitioned moves a whole store's
//	                      instances into the partitions (migratepartitions.go)
//	P moving              (partition) set only while a whole store is being moved:
//	                      the move adopts instances only while it exists
//	P mv:<kind>:<id>      (partition) an instance's key restored by the move, before
//	                      the adopt script renames it into place; expires after 10
//	                      minutes
//	P sdl:<sid>           (partition) marker of a commit that consumed stimulus sid:
//	                      its outcome, or releasedMarker once the sweep released
//	                      the reservation; expires after DeliveredRetention
//	P ob, P obx, P obseq  outbox: entry id -> time + len ":" target + len ":" message
//	                      id + message record; the entries by (time, id); the
//	                      entry counter. Messages for another store's instances
//	                      (a catalog's: all of Deliver's and a batch's)
//	P rcv, P rcvx         entries received from other stores' outboxes: source tag
//	                      "/" entry id -> forget time; by (forget time, entry)
//	P workflow-pauses     paused workflows: name → JSON of its weft.WorkflowPause
//	P ck:<key>            concurrency slots of a key (slots.go): hash h (the holders,
//	                      JSON in grant order, times in Unix nanoseconds), lim and
//	                      pol (the terms of its last UpdateSlots), seq (the last
//	                      sequence number a waiter joined with)
//	P cl:<key>, P cw:<key>   its line: waiter ids by sequence number (score); and
//	                      waiter id → when it joined (time)
//	P cx                  keys of concurrency slots with holders or waiters: key
//	P batch:<id>          batch hash: doc (its document, written once), state, rev,
//	                      wake (RFC 3339, exact; "" for none), wx (the wake's time in
//	                      P batches:due, "" for none), actor, ct, ut (times), n (the
//	                      Seq of its last item), c:<outcome> (its items with it)
//	P batch-items:<id>    its items: instance → "<seq>|<outcome>|<reason>|<unix nanos>"
//	                      (the time the item got its outcome; a reason may hold "|")
//	P batch-seq:<id>      its items' instances by Seq (score)
//	P batch-o:<o>:<id>    its items' instances with outcome o, by Seq (score)
//	P batches:all, P batches:due
//	                      batches by (created, id); with a wake, by (wake, id): time + id
//
// # Catalog cache
//
// GetDefinition, CurrentPlugin and GetWorkflowPause, which every start
// calls, answer from a cache of what they read, tagged with the generation
// (cg) they read it in, after one GET of cg: an entry is used only while
// the generation is still its own, so a change made through any node is
// seen by the next read on every node. A start reads small keys instead of
// running scripts of two reads each (catalogcache.go). The pauses are read
// whole (few workflows are paused), so that one read answers every
// workflow, paused or not, until the next change.
//
// Lists page with ZRANGEBYLEX from an exclusive start: cursors are the
// base64 of the last member (or name) returned, opaque to clients.
// Counters and revisions are Lua numbers in the scripts: exact up to 2^53.
//
// # Search
//
// A listing by a search attribute (InstanceFilter.Search) is a script
// that walks P ix:a:<name> over the intervals of the range (one per value
// of an IN), reads the hash of each instance it meets, and returns those
// that the workflow, status and time filters accept, reading at most 500
// entries a call (searchBatch); Go filters them with InstanceFilter.Match
// and calls again until it has the page and one instance more, the range
// ends, or InstanceFilter.Examine entries were read. A listing with Match
// alone walks the status indexes the same way. ListInstances states what
// a cursor guarantees when instances change between pages.
//
// A Commit passes the instance's sa field as an argument; the script
// compares it with the stored one and touches no index when they are
// equal: an instance without search attributes costs one more field read
// and no command. A node of a build before search attributes neither
// writes nor removes the entries: run the builds one at a time (as
// docs/cluster.md says of every upgrade); an entry left behind by an
// instance such a node deleted is skipped by listings.
//
// # Batches
//
// A batch's keys each start with a name of their own and end with the id
// (batch:, batch-items:, batch-seq:, batch-o:<outcome>:), so that the keys
// of two batches never meet, whatever their ids hold (the batch "x:items"
// and the items of "x" are two keys). ApplyBatchItems is one script: the
// revision compare-and-set, the batch's state and wake, and for each
// pending item its outcome, its move between the outcome indexes, the
// counts, and its messages, written by writeMessage, the function Deliver
// writes an inbox with (the message's Seq from P mseq, the id checked
// against the inbox, the wait started in the instance's ws field and P mw).
// The store is one slot, so the inboxes of every instance of a chunk are in
// it: an item's outcome and its messages are written by one script, never
// one without the other, which is what makes a batch's operation reach each
// instance exactly once. A chunk is at most weft.MaxBatchChanges (500)
// items, so that no script holds Redis for long; CreateBatch and
// AddBatchItems write at most weft.MaxBatchIDs (10,000) items, one HSETNX
// each (an instance that is an item already is left out) and one ZADD per
// 500 to each index. DeleteBatch UNLINKs the items' keys, which Redis frees
// off its main thread.
//
// # Client and Close
//
// The caller owns Config.Client: Close marks the store closed (calls
// return weft.ErrClosed) and leaves the client open, since the locker and
// the queue of the same node may share it. A write that has been sent is
// waited for even when its context ends (the client's timeouts bound the
// wait): the script runs whole or not at all, and the answer says which.
// Only a lost connection leaves it unknown whether a script ran: the
// error wraps the network error, and a retry is safe. go-redis itself
// retries a command whose answer was lost (Options.MaxRetries), so a
// script that did run may be answered as its retry is: Commit and the
// schedule writes are compare-and-sets (an applied create answers
// ErrExists, an applied update ErrConflict: re-read, and find the write
// there), EnqueueStimulus and Deliver answer with their own stimulus
// record, the puts answer created=false, PauseWorkflow answers the pause
// it stored, and the deletes (UnpauseWorkflow too) ErrNotFound. A
// Redis error is returned wrapped, naming the operation, the id and the
// address; one that says the server cannot be reached or cannot serve now
// (a network error, no free connection, LOADING, READONLY, MASTERDOWN
// and the like) also matches weft.ErrUnavailable, which the API answers
// as 503.
package redisstore
