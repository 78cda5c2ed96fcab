// Package embedded is the embedded [store.Store]: one Pebble directory
// (github.com/cockroachdb/pebble) in the data directory, no other service;
// or one bbolt file (go.etcd.io/bbolt), the store of earlier versions, kept
// for migrating it and as the format of backups. Config.Engine chooses; the
// store's logic, keys and values are the same on both (see "Engines").
//
// # Engines
//
// The store's logic reads and writes buckets of ordered byte keys through
// a small seam (kv.go) with two engines under it:
//
//   - EnginePebble (kvpebble.go): a bucket is a key prefix (see
//     "Layout"). A durable commit is one fdatasync of Pebble's WAL, and
//     Pebble's commit pipeline groups the synced batches of concurrent
//     writers into one sync: measured for issue 40 (BENCHMARKS.md, "The
//     embedded store's commit: bbolt settings and Pebble"), Pebble
//     commits 2.6, 4 and 6 times as fast as the store's create on bbolt at
//     1, 10 and 50 writers. Reads run on a snapshot; writes, one at a
//     time (as on bbolt), in an indexed batch that reads its own writes,
//     committed with pebble.Sync.
//   - EngineBolt (kvbolt.go): one bbolt file, as the store was until
//     issue 40. A bbolt commit is two fdatasyncs (the pages, then the meta
//     page) whatever its options. It stays to read the files of older
//     builds (Migrate copies one into a Pebble directory; the node does so
//     at its start, host/node's "Data directory") and as the format of
//     backups on both engines (Backup, CheckFile).
//
// EnginePebble is Config.Engine's default.
//
// What follows holds on both engines, but where it names bbolt's own
// mechanics (its pages, its meta page, its file lock, its panics): those
// are EngineBolt's, and "Files" says what differs on Pebble.
//
// # Why Pebble (and bbolt before it), not SQLite
//
// The host is pure Go (it builds with CGO_ENABLED=0), which left two
// embedded databases at first: modernc.org/sqlite in WAL mode, or
// go.etcd.io/bbolt. The store was bbolt until issue 40, because:
//
//   - Group commit fits it: concurrent writers share one transaction and
//     one fsync (the store batches on its own goroutines, see "Corrupt
//     pages" below). Durable acknowledgements at thousands per second
//     need exactly that; with SQLite we would write the batching
//     ourselves around a single writer connection.
//   - The store's access paths are all key-range scans we design anyway:
//     an instance by id, history by (instance, seq), timers by due time,
//     bookmarks by (event, key), leases by expiry. Ordered byte keys
//     express them directly; a query planner adds nothing.
//   - It is small, pure Go, one file with no background threads, and its
//     behaviour on crash (copy-on-write pages) is simple to reason about.
//     modernc's SQLite is transpiled C: larger, and slower per statement.
//
// Pebble keeps all of that (ordered byte keys, pure Go, one writer at a
// time in the store) and costs less a commit: one fdatasync of its WAL,
// where bbolt's commit is two fdatasyncs plus the pages it rewrites,
// whatever its options, and its commit pipeline groups the synced batches
// of concurrent writers. Issue 40 measured it (BENCHMARKS.md, "The
// embedded store's commit: bbolt settings and Pebble"): its durable
// commits ran 2.6, 4 and 6 times as many a second as the store's create on
// bbolt, at 1, 10 and 50 writers; it is the store since. What it costs: a directory of files and background flushes and
// compactions, where bbolt had one file.
//
// What we give up, on both: ad-hoc queries for operators (the HTTP API
// lists and filters instead) and concurrent writers (one write
// transaction at a time; batching makes that the right shape for
// fsync-bound work).
//
// # Durability and group commit
//
// Every write is batched: writes that arrive together share one read-write
// transaction and one fsync, and each call
// returns only after that transaction is on disk, so a 201/202 sent after
// a write returns means the data is durable, as those answers promise. A
// write refused by its own checks (ErrConflict, ErrFenced, ErrExists…)
// changes nothing and does not fail the others of its batch.
//
// Group commit needs no delay: a write that finds no transaction
// committing commits at once, alone, and the writes that arrive while a
// transaction commits wait for it and then share the next one. A lone
// writer pays its own commit only, and under load each transaction carries
// every write that arrived during the last fsync. Measured on a 2-core
// machine (a bbolt commit is two fdatasyncs plus the page writes; the
// fdatasyncs took 0.3–0.8 ms there), creating instances with about 1 KiB of
// vars and one history event, commits per second:
//
//	writers          1      10      50     200
//	no delay     1,288   3,333   6,344   7,283
//	1 ms delay     445       —   3,703       —
//
// The second row is bbolt's DB.Batch scheme, whose first write of a batch
// waits a fixed delay for others, as this store did before; `go test
// -bench CommitWriters ./internal/store/embedded/` reproduces the first.
//
// # Layout
//
// On Pebble, a bucket is a key prefix: one byte with the length of the
// bucket's name, then the name, then the key within the bucket. A bucket
// exists once its sequence key exists: 0x00 (no prefix starts with it, as
// no name is empty), the name's length, the name, holding the bucket's
// sequence (bbolt's Bucket.Sequence) as 8 big-endian bytes. Open writes
// every bucket's with the schema, in one batch.
//
// Records are JSON, but for an instance's (record.go): its JSON without
// the instance's input, output and vars, then those three documents as
// they are, each after its length, so that a commit neither scans nor
// re-encodes them (schema version 2; a version-1 store's records are all
// JSON, read as they are and framed by their next commit); and for a
// commit's history entries, which share one value under the first's seq,
// each after its length (schema version 3; a value of one entry is its
// JSON, as every entry's was before). Keys of indexes are tuples encoded to sort as tuples: strings escaped (0x00 → 0x00 0xFF) and
// terminated by 0x00 0x01, times as 8 big-endian bytes of Unix nanoseconds
// with the sign bit flipped, numbers as 8 big-endian bytes. Every index is
// updated in the transaction that changes what it indexes. Buckets:
//
//	meta                          schema → "3"
//	instances                     id → instance (without State) + last history seq
//	                              + whether it has no state, framed
//	state                         id → State bytes
//	history                       (id, first seq) → the entries of one commit (history.go)
//	bookmarks                     (id, step, event, key) → bookmark
//	bookmarks_by_event            (event, key, id, step) → bookmark
//	timers                        (id, timer id) → timer
//	timers_by_due                 (due, id, timer id) → timer
//	instances_by_created          (created, id)
//	instances_by_workflow         (workflow, created, id)
//	instances_by_status           (status, created, id)
//	instances_by_workflow_status  (workflow, status, created, id)
//	leases_by_expiry              (expiry, id), non-terminal leased instances only
//	instances_by_delete_after     (delete after, id), terminal instances with a DeleteAfter only
//	plugin_pins                   (plugin, id) → version, non-terminal instances only
//	stimuli                       id → stimulus (any state) + queue seq
//	stimuli_queued                (name, key, seq) → id
//	stimuli_by_expiry             (expires, id), queued only
//	stimuli_dead                  (died, id)
//	stimuli_by_forget             (forget at, id), delivered and dead
//	definitions                   (name, version) → definition
//	definitions_latest            name → latest version
//	definitions_seq               name → highest version ever (kept after delete)
//	plugins                       name → current version + history
//	grants                        plugin name → grants (kept when the plugin is deleted)
//	grants_seq                    plugin name → highest revision ever (kept after delete)
//	inbox                         (id, seq) → message
//	inbox_ids                     (id, message id) → seq
//	inbox_waiting                 id → since, instances whose inbox holds a message only
//	                              (a read finds an empty inbox with one point read)
//	inbox_waiting_by_time         (since, id) (WaitingInboxes)
//	heartbeats                    (id, token) → an attempt's last heartbeat
//	heartbeats_of                 id → nothing, instances with heartbeats only (a commit that
//	                              ends one finds none with one point read)
//	schedules                     id → schedule + last event seq
//	schedules_by_wake             (wake, id), schedules with a Wake only
//	schedule_events               (id, seq) → event, the last weft.MaxScheduleEvents of each
//	slots                         slot key → limit, policy, holders, length of the line
//	slot_line                     (slot key, seq) → waiter, seq from one sequence of the store
//	slot_waiters                  (slot key, waiter id) → seq
//	instances_by_search           (name, type, value, created, id), see "Search attributes"
//	search_attributes             name → type, workflow that registered it
//	batches                       id → batch (without its document) + counts + last item seq
//	batch_documents               id → the batch's document (written once, at create)
//	batches_by_wake               (wake, id), batches with a Wake only
//	batches_by_created            (created, id)
//	batch_items                   (batch, instance) → (seq, outcome, time, reason)
//	batch_items_by_seq            (batch, seq) → instance
//	batch_items_by_outcome        (batch, outcome, seq) → instance
//	workflow_pauses               workflow name → pause (who, why, since)
//	tapes                         (id, step path, exec, attempt) → a recorded attempt's summary
//	tape_data                     (id, step path, exec, attempt) → its tape's bytes
//	tapes_by_plugin               (plugin, recorded at, id, step path, exec, attempt) → the
//	                              instance's workflow (FindTapes: a plugin's newest first)
//
// UpdateSlots reads a key's record, the front of its line (one seek) and
// its caller's own place (slot_waiters), never the whole line (but under
// cancel_oldest, slots.WindowFront), and writes nothing when the
// operation changes nothing: it runs the operation in a read transaction
// first, and again in the write transaction only when that changes
// something (slots.go).
//
// GetDefinition, GetPlugin and GetWorkflowPause, which every start calls,
// answer from a cache of the records they decoded (catalogcache.go; the
// pauses are read and cached all at once). The file is this process's
// alone, so every change of the catalog (definitions, plugins, workflow
// pauses) is one of the store's own writes, and each invalidates the whole
// cache once it has ended.
//
// On Pebble, the engine also remembers the values last written to or read
// by a write transaction from instances, state, plugins, inbox waits and
// heartbeat marks, and the keys found or made absent there (recent.go), up
// to 8 MiB: a run reads the record its start has just written, and its
// commit reads it again; every read of an instance looks for its inbox's
// wait, and every commit that ends one for its heartbeats' mark, mostly
// not there (a commit that creates an instance tells the engine so); and a
// read through Pebble's memtables and levels costs more than the rest of
// the read. Every write goes through the engine, one transaction at a
// time, so the memory is exact; a read transaction takes a value from it
// only when its snapshot holds that value (a generation per commit, noted
// before the snapshot). A read of one instance takes its snapshot only
// when memory cannot answer it (viewLazily): a snapshot's making and
// closing take the lock that Pebble's commits take.
//
// # Search attributes
//
// An instance's search attributes (Instance.Search) are indexed in
// instances_by_search, one key per attribute, and per distinct keyword of
// a keywords attribute: the name (a tuple string), one byte for the type
// (s string, n number, b bool, t time, k keywords), the value, then the
// instance's created time and id as in the other list indexes. A value
// sorts as its type does: a number is its IEEE 754 bits, big-endian, with
// the sign bit flipped when positive and every bit flipped when negative
// (-0 is 0; NaN and infinities are refused with ErrInvalid); a time is a
// tuple time; a bool one byte, 0 or 1; a string and a keyword a tuple
// string, whose escaping keeps the byte-wise order of the strings. Commit
// takes the entries to delete from the record it replaces, which it reads
// anyway, and writes only the keys that changed, so a commit of an
// instance without attributes costs nothing more. A string that is not
// UTF-8 is refused (ErrInvalid): JSON would store another string than the
// one indexed.
//
// ListInstances with a SearchRange walks the keys of the range (one
// interval per value of In) and reads each instance's record. A keywords
// attribute's instance is listed at the first of its keywords in the
// range in the walk's order: met under a later one, it is skipped when
// another keyword it holds, in the range, comes first; no state is kept
// across pages, and the cursor is the suffix of the last key read.
//
// # Inbox
//
// A message's Seq comes from one sequence of the whole store (the inbox
// bucket's), so it increases within every inbox and is never reused, even
// for an instance deleted and created again; it is not dense. Deliver
// records its stimulus with DeliveredTo set to the instance of the first
// message it wrote (empty when it wrote none), and forgets it after
// Config.DeliveredRetention exactly like a stimulus consumed by a Commit. A
// Commit applies Consumed, then Send, after every check that can refuse it
// and after writing the instance itself, so a message it sends to its own
// instance (a workflow signalling itself, even from its create) is written.
//
// # Files
//
// Open creates the file and its directory when missing, waits at most
// Config.OpenTimeout for the file lock of another process, and refuses,
// naming the file, anything that is not a store of this schema: a file
// bbolt cannot read (corrupt, truncated), another program's bbolt file, a
// newer schema. bbolt panics on some corrupt pages instead of failing; Open
// and reads turn such a panic into an error naming the file. The freelist is
// synced (NoFreelistSync is off): with it on, bbolt rebuilds the freelist
// at Open in a goroutine that crashes the process on a corrupt page.
//
// With EnginePebble, Open creates the directory when missing, waits as
// long for Pebble's lock of it (held by another process or another Store),
// and refuses, naming the directory, a file (a bbolt store: Migrate it), a
// directory holding anything but a Pebble store, another program's Pebble
// store (it is opened at its own format and left so) and a newer schema.
// Pebble's block cache is 64 MiB; its logs go to Config.Logger. Migrate
// copies a bbolt store into a new Pebble directory: built beside it
// (".migrating"), checked (keys per bucket, sequences), then renamed, so a
// crash leaves no store or a whole one. A backup is a bbolt file on both
// engines; on Pebble, Backup writes it from one snapshot beside the store
// as it begins, and Open removes one that a crash left, as on bbolt.
//
// # Corrupt pages
//
// On Pebble, a block whose checksum fails is an error marked as Pebble's
// corruption; one that fails a write transaction breaks the store as
// below. (Pebble also reports it to its DataCorruption event, whose
// default handler, while kvpebble.go sets none, calls Logger.Fatalf: the
// process exits, logging the file.) The rest of this section is bbolt's.
//
// A write meets a corrupt page in its own reads or in bbolt's commit (a
// rebalance reading a sibling page, a freelist that frees a page twice).
// bbolt's DB.Batch would commit on a goroutine of its own, where such a
// panic kills the process, so the store batches writes itself, with
// Batch's rules (batch.go), and commits on the goroutine of the batch's
// first writer, under recover. The panic fails the batch with an error
// naming the file and breaks the store: every later write fails at once
// (ErrBroken, Store.Err; the node's readiness reports it), while reads go
// on where their pages are sound. A failed commit writes no meta page, so
// nothing acknowledged is lost. The way out is offline: restore the file
// from a backup (Store.Backup) or repair it, and restart.
package embedded
