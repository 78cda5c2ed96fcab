// Package store defines where the host keeps everything durable — workflow
// instances with their history, bookmarks, timers and leases, the stimulus
// queue, workflow definitions and plugin metadata — as one interface,
// [Store], with two implementations: internal/store/embedded (embedded, one
// Pebble directory) and the Redis store of the cluster mode. Both run the
// conformance suite internal/store/storetest, which states the contract as
// tests. The errors it names (ErrNotFound, ErrConflict, ErrFenced,
// ErrExists, ErrInUse, ErrInvalid, ErrClosed, ErrUnavailable) are the
// host's vocabulary, declared in host/weft; the ones only a store's caller
// meets (ErrNotQueued, ErrInboxNotEmpty, ErrCatalogChanged) are here.
//
// # Writing an instance
//
// Every write of an instance is one [Commit]: the instance's new state plus
// the history events, bookmark set, timer set and consumed stimulus that go
// with it, applied atomically and durably, or refused without any change.
// A Commit is a compare-and-set on two tokens:
//
//   - Instance.Rev, the revision the writer read. The store sets Rev (1 on
//     create, +1 on every Commit); a Commit whose Rev is not the stored one
//     fails with [weft.ErrConflict]. Rev 0 means create, and fails with
//     [weft.ErrExists] when the id is taken.
//   - Commit.Fence, the fencing token of the writer's lock on the instance
//     (lock.Lease.Token). A Commit whose Fence is lower than the stored one
//     fails with [weft.ErrFenced], even if its Rev matches, and that check comes
//     first; an equal or higher Fence is accepted and stored. A writer that
//     lost its lock (paused past its TTL) therefore cannot overwrite what
//     the next holder wrote (docs/architecture.md, "Locks and fencing").
//
// The engine uses it like this:
//
//   - Create (POST /workflows/{name}/instances): Commit with Rev 0 and Fence
//     0 (creating needs no lock: only one create of an id can win at Rev
//     0). A client-supplied id that exists
//     gives ErrExists: read the stored instance and answer with it
//     (idempotent create). The 201 may be sent when Commit returns.
//   - Transition (run, resume, cancel): under the lock
//     workflow-instance:{id}, read the instance, change it, Commit it with
//     the Rev read and the lease token as Fence. Use the returned rev as the
//     Rev of the next Commit. ErrFenced means the lock was lost: stop.
//     ErrConflict means someone else wrote: re-read and decide again.
//   - Resume by a stimulus: the Commit that runs the resumed step names the
//     stimulus in DeliveredStimulus (and the answer in DeliveredOutcome), so
//     the stimulus leaves the queue in the same transaction as the bookmark
//     set that no longer holds its bookmark. A stimulus is consumed by one
//     Commit; [ErrNotQueued] says another consumer (or expiry) came first.
//   - Start of a run: GetInstance sets InboxWaiting when the inbox holds a
//     message; a run that finds it false need not read the inbox, as long
//     as it is woken by messages written after that read and ends with a
//     draining Commit (below).
//   - End of a run: the Commit made when nothing more is in flight sets
//     Drains, so that a message written to the inbox since the writer last
//     read it refuses the commit ([ErrInboxNotEmpty], nothing written):
//     read the inbox, apply it, and commit again.
//   - Lease takeover (recovery): ExpiredLeases names instances whose owner
//     stopped renewing. Take the instance lock, GetInstance, check that the
//     lease is still expired, and Commit with Lease set to this node, this
//     boot and a new expiry. The Rev compare-and-set makes two recoverers
//     resolve to one winner, and RenewLeases never revives an expired
//     lease, so the old owner cannot race the takeover by renewing.
//   - Release: Commit with a zero Lease (for example when the instance
//     suspends or ends). Terminal instances never appear in ExpiredLeases
//     whatever their Lease says.
//
// # Decisions
//
// Where the design left room, these were chosen:
//
//   - Leases. RenewLeases changes neither Rev nor UpdatedAt, so that a
//     background renewal never makes the owner's next Commit stale. In
//     exchange, a Commit whose Lease names the stored owner (same Node and
//     Boot) keeps the later of the stored and the committed expiry: the
//     owner's commit of an instance read before a renewal does not shorten
//     the lease. A lease that has expired (by the store's clock) is not
//     renewed any more: the owner learns it lost it, because recovery may
//     already be taking it. ExpiredLeases lists non-terminal instances
//     (pending, running, suspended) whose lease is set and whose expiry is
//     not after now; an empty lease is never listed.
//   - Retention. The store deletes nothing by itself: it keeps a
//     terminal instance's DeleteAfter, indexed, and ExpiredInstances lists
//     those whose time came; the engine's retention sweep deletes them.
//     DeleteAfter is refused on an instance that is not terminal, so a
//     running instance can never be listed.
//   - Stimuli. EnqueueStimulus requires an ID (the engine generates one when
//     the client gives none) and an ExpiresAt (the TTL); the store sets
//     CreatedAt and State. PendingStimuli and Commit treat a stimulus whose
//     ExpiresAt has passed as gone even before ExpireStimuli sweeps it. A
//     delivered stimulus is remembered (GetStimulus, and EnqueueStimulus
//     answers with it) until its ExpiresAt or a retention window after the
//     delivery, whichever is later; a dead one for a retention window
//     after it died. ExpireStimuli forgets the records whose time came, so
//     one periodic call sweeps both.
//   - Lists. Pages hold ClampLimit(limit) items: 100 by default, at most
//     1000. Instances are ordered by (CreatedAt, ID), oldest first or newest
//     first, and a cursor is the last key listed, so that instances created
//     while a client pages never shift pages already read (newest first,
//     they are not listed at all: they come before the first page).
//     Cursors are opaque and specific to an implementation. ListInstances
//     omits State; everything else is included.
//   - Definitions. Versions are never reused: after DeleteDefinition, the
//     next PutDefinition of that name continues the numbering, so an
//     instance's (Workflow, Version) never names other content. Putting
//     content equal to an older, non-latest version makes a new version.
//   - Plugins. Commit refuses (with ErrNotFound) to pin a plugin version
//     that is not stored when the instance is not terminal, and DeletePlugin
//     refuses with an *weft.InUseError while a non-terminal instance pins any
//     version; both checks run inside the write transaction, so no instance
//     can start using a plugin being deleted. Re-uploading an older version
//     makes it current again, with a new CreatedAt.
//   - Times. The store's clock (each implementation's Config.Now) sets
//     CreatedAt, UpdatedAt, stimulus times and event times left zero;
//     CreatedAt is kept when a create supplies it (state import). Times come
//     back in UTC.
//   - Validation. A malformed argument fails with [weft.ErrInvalid] before
//     anything is read or written; JSON fields (Input, Output, Vars,
//     Payload, Data…) must be valid JSON and come back compacted.
//   - Context. Every method returns ctx.Err() for a context that is already
//     done. A write that has begun is not abandoned when ctx ends: it returns
//     when it is durable or refused, which keeps "the call failed" meaning
//     "nothing was written".
//
// # Inbox
//
// An instance's inbox holds Messages (stimuli for its bookmarks, children's
// ends, cancellations) until a Commit of the instance consumes them. Seq is
// one counter for the whole store: increasing within every inbox, never
// reused, not consecutive. A message ID is deduplicated while the inbox
// holds it; once consumed (or its instance deleted) the same ID can be
// written again, so a sender that must not deliver twice keeps its own
// record (a stimulus's delivered state does that for Deliver). Deliver sets
// a delivered stimulus's DeliveredTo to the instance of the first message it
// wrote. Message IDs may be up to MaxMessageIDLen bytes, longer than
// instance ids, because they embed instance ids. Commit applies Consumed
// before Send, so an instance may send to itself.
package store
