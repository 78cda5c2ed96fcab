package store

import (
	"context"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/slots"
)

// Store is where the host keeps everything durable: instances with their
// history, bookmarks and timers, leases, the stimulus queue, definitions and
// plugin metadata. Implementations are safe for concurrent use; the
// conformance suite internal/store/storetest states their contract as tests.
//
// Every method returns ctx.Err() when ctx is already done, without doing
// anything. A write that has started is not abandoned when ctx ends later:
// it returns when it is durable or refused. A write method that returns a
// nil error has made its change durable.
type Store interface {
	// Commit writes an instance and everything that changes with it in one
	// atomic, durable step, and returns the instance's new revision. See
	// Commit for the fields.
	//
	// # Errors
	//
	// A refused commit changes nothing and returns a *CommitError wrapping:
	//   - ErrExists: Rev is 0 and the id is taken (idempotent create: read
	//     the stored instance with GetInstance).
	//   - ErrNotFound: Rev is not 0 and no such instance exists.
	//   - ErrFenced: Fence is lower than the stored fence. It takes
	//     precedence over ErrConflict.
	//   - ErrConflict: Rev is not the stored revision.
	//   - ErrNotQueued: DeliveredStimulus is not a queued stimulus.
	// An error matching ErrNotFound (not a *CommitError) when a newly pinned
	// plugin version is not stored, and ErrInvalid for a malformed commit.
	Commit(ctx context.Context, c Commit) (rev uint64, err error)

	// GetInstance returns the instance with its State, or ErrNotFound.
	GetInstance(ctx context.Context, id string) (*weft.Instance, error)

	// InstanceStatuses returns the status of each instance of ids that
	// exists; the others are absent from the map. It reads nothing else:
	// the schedules sweep asks it what became of many runs at once.
	InstanceStatuses(ctx context.Context, ids []string) (map[string]weft.Status, error)

	// ListInstances returns a page of instances matching f, without their
	// State, ordered by (CreatedAt, ID), oldest first unless f.NewestFirst,
	// and the cursor of the next page ("" after the last page). Oldest
	// first, instances created after the listing started appear on later
	// pages; in either order none is listed twice.
	//
	// With f.Search, the order is that attribute's index instead: by
	// value, then (CreatedAt, ID), reversed when f.NewestFirst; an
	// instance holding several keywords of the range is listed once, at
	// the first of them in that order. The cursor is then a position in
	// the index, not a snapshot: an instance whose value does not change
	// between pages is listed at most once (exactly once when it matches
	// throughout); one whose value changes is listed again when its new
	// place is after the cursor, and not at all when it is before. When
	// f.Search or f.Match filters, one call reads at most f.Examine
	// instances (weft.MaxExamine for 0), and may answer a short or empty
	// page with a cursor. A range that its type cannot read (values of
	// another type, a Prefix on a number, NaN) is ErrInvalid.
	ListInstances(ctx context.Context, f weft.InstanceFilter) (items []weft.Instance, next string, err error)

	// CountInstances counts the instances in each status, of one workflow
	// when workflow is not empty. Statuses without instances are absent.
	CountInstances(ctx context.Context, workflow string) (map[weft.Status]int, error)

	// DeleteInstance removes an instance with its state, history,
	// bookmarks, timers, inbox, heartbeats and index entries (the one
	// ExpiredInstances reads included). It returns ErrNotFound when there is no such
	// instance and a *CommitError wrapping ErrFenced when fence is lower
	// than the stored one.
	DeleteInstance(ctx context.Context, id string, fence uint64) error

	// History returns up to limit events of an instance with Seq greater
	// than afterSeq, in order. ErrNotFound when there is no such instance.
	History(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.HistoryEntry, error)

	// Deliver writes msgs to their instances' inboxes and, when s is not
	// nil, records s as delivered (State delivered, with s.Outcome) in the
	// same durable transaction. When s's ID is already known (queued,
	// delivered or dead, not yet forgotten) it writes nothing and returns
	// that record, as EnqueueStimulus does. Messages for instances that do
	// not exist are dropped; a message whose ID its inbox already holds is
	// not written twice.
	Deliver(ctx context.Context, s *weft.Stimulus, msgs []weft.Message) (existing *weft.Stimulus, err error)

	// Inbox returns an instance's messages ordered by Seq; ErrNotFound when
	// there is no such instance. DeleteInstance removes the inbox too.
	Inbox(ctx context.Context, id string) ([]weft.Message, error)

	// WaitingInboxes returns up to limit ids of instances whose inbox has
	// held a message since before the time before, the longest waiting
	// first: work whose wake-up was lost (a node died between writing a
	// message and queueing its instance), which recovery queues again. An
	// instance's wait counts from its oldest message, or from the last
	// Commit that consumed some of its messages, whichever is later.
	WaitingInboxes(ctx context.Context, before time.Time, limit int) ([]string, error)

	// Bookmarks returns an instance's bookmarks ordered by StepPath;
	// ErrNotFound when there is no such instance.
	Bookmarks(ctx context.Context, id string) ([]weft.Bookmark, error)

	// FindBookmarks returns every bookmark, of any instance, waiting for
	// the event name and key, ordered by (InstanceID, StepPath).
	FindBookmarks(ctx context.Context, event, key string) ([]weft.Bookmark, error)

	// Timers returns an instance's timers ordered by (Due, ID); ErrNotFound
	// when there is no such instance.
	Timers(ctx context.Context, id string) ([]weft.Timer, error)

	// DueTimers returns up to limit timers, of any instance, with Due not
	// after now, ordered by (Due, InstanceID, ID). It removes nothing.
	DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error)

	// RenewLeases moves the lease expiry of the instances r.IDs to
	// r.Expiry, in one durable transaction, for those whose lease is held
	// by r.Node and r.Boot, has not expired (by the store's clock) and that
	// are not terminal; it returns those, in the order given. The others
	// are left alone and the caller has lost them. Renewal changes neither
	// Rev nor UpdatedAt.
	//
	// In the same transaction it stores r.Heartbeats, each replacing the
	// one stored for its (InstanceID, Token), for the instances that pass
	// the same test (held by Node and Boot, unexpired, not terminal), whether
	// or not they are in r.IDs; the others are dropped. This is how the
	// heartbeat scheduler persists the latest details of running attempts
	// with its renewals, so that they survive the node.
	RenewLeases(ctx context.Context, r LeaseRenewal) (renewed []string, err error)

	// Heartbeats returns the heartbeats RenewLeases stored for an
	// instance's attempts, ordered by Token; ErrNotFound when there is no
	// such instance. A Commit that makes the instance terminal removes
	// them, and so does DeleteInstance.
	Heartbeats(ctx context.Context, id string) ([]Heartbeat, error)

	// ExpiredLeases returns up to limit ids of non-terminal instances whose
	// lease is set and expired at now (Expiry not after now), earliest
	// expiry first: the instances that recovery takes over, with a Commit
	// that sets a new Lease.
	ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error)

	// ExpiredInstances returns up to limit ids of terminal instances whose
	// DeleteAfter is set and not after now, ordered by (DeleteAfter, ID),
	// earliest first: the instances the retention sweep deletes, with
	// DeleteInstance under the instance's lock. An instance leaves the list
	// when it is deleted or committed without a DeleteAfter.
	ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error)

	// EnqueueStimulus queues s (ID, Name and ExpiresAt are required; the
	// store sets CreatedAt and State). If a stimulus with that ID is known
	// — queued, delivered or dead, and not yet forgotten — it returns that
	// record and enqueues nothing; otherwise it returns nil once s is
	// durably queued.
	EnqueueStimulus(ctx context.Context, s weft.Stimulus) (existing *weft.Stimulus, err error)

	// GetStimulus returns the stimulus with that id, in any state, or
	// ErrNotFound.
	GetStimulus(ctx context.Context, id string) (*weft.Stimulus, error)

	// PendingStimuli returns the queued stimuli with that name and key that
	// have not expired by the store's clock, oldest first.
	PendingStimuli(ctx context.Context, name, key string) ([]weft.Stimulus, error)

	// QueuedStimuli returns a page of the queued stimuli, expired or not,
	// ordered by (ExpiresAt, ID), and the cursor of the next page ("" after
	// the last page). The recovery sweep reads it to pair stimuli with
	// bookmarks that missed them.
	QueuedStimuli(ctx context.Context, cursor string, limit int) (items []weft.Stimulus, next string, err error)

	// ExpireStimuli moves up to limit queued stimuli whose ExpiresAt is not
	// after now to the dead letters and returns them (earliest expiry
	// first). It also forgets up to limit delivered and dead stimuli whose
	// retention ended at now (see the implementation's configuration);
	// a forgotten ID may be enqueued again.
	ExpireStimuli(ctx context.Context, now time.Time, limit int) ([]weft.Stimulus, error)

	// DeadLetters returns a page of dead stimuli, in the order they died,
	// and the next cursor ("" after the last page).
	DeadLetters(ctx context.Context, cursor string, limit int) (items []weft.Stimulus, next string, err error)

	// PutDefinition stores source as the next version of the definition
	// name, unless hash equals the latest version's hash: then it returns
	// that version and created=false.
	PutDefinition(ctx context.Context, name, hash string, source []byte) (version int, created bool, err error)

	// GetDefinition returns a version of a definition, the latest for
	// version 0, or ErrNotFound.
	GetDefinition(ctx context.Context, name string, version int) (*weft.Definition, error)

	// ListDefinitions returns a page of definitions, the latest version of
	// each, ordered by name, and the next cursor.
	ListDefinitions(ctx context.Context, cursor string, limit int) (items []weft.Definition, next string, err error)

	// ListDefinitionVersions returns the versions kept of a definition,
	// the latest first, without their Source, or ErrNotFound when there
	// is none: what a client lists to link to each, since a deletion
	// leaves a gap in the numbers.
	ListDefinitionVersions(ctx context.Context, name string) ([]weft.Definition, error)

	// DeleteDefinition removes every version of a definition, or returns
	// ErrNotFound. Instances are not checked: they keep their version
	// number, which a later definition of the same name never reuses.
	DeleteDefinition(ctx context.Context, name string) error

	// RegisterSearchAttributes records, in one atomic step, the types of
	// the search attributes that a definition of workflow declares: a
	// name not registered yet gets its type (and workflow as the one that
	// registered it); a name registered with the same type is left as it
	// is. A name registered with another type refuses the whole call
	// with a *SearchTypeError, and nothing is registered. Names are never
	// unregistered: the stores' indexes keep values of that type, and a
	// query reads the name with it (docs/operations.md, "Search").
	RegisterSearchAttributes(ctx context.Context, workflow string, attrs map[string]weft.SearchType) error

	// SearchAttributes returns every registered search attribute, ordered
	// by name.
	SearchAttributes(ctx context.Context) ([]weft.SearchAttribute, error)

	// PutPlugin makes rec the current version of the plugin rec.Name (the
	// store sets CreatedAt) and returns created=true, unless rec.Version is
	// already current: then it changes nothing and returns false.
	PutPlugin(ctx context.Context, rec weft.PluginRecord) (created bool, err error)

	// GetPlugin returns a plugin's current version and history, or
	// ErrNotFound.
	GetPlugin(ctx context.Context, name string) (*weft.Plugin, error)

	// CurrentPlugin returns a plugin's current version, or ErrNotFound: what
	// a start pins, read without the plugin's history.
	CurrentPlugin(ctx context.Context, name string) (*weft.PluginRecord, error)

	// ResolveStart reads what a start of workflow needs: its latest
	// definition (ErrNotFound when there is none, before uses is called)
	// and the current version of each plugin uses names for it (an error
	// reading one, ErrNotFound when it is not stored, is a *PluginError
	// naming it), and the workflow's pause (StartCatalog.Paused). An error
	// from uses is returned as it is; uses may be called more than once.
	// With cached,
	// the store may answer from what it read before, without a round trip
	// and without checking that it is still current, and says so with
	// StartCatalog.Generation (see there); without, the answer is current
	// at the call.
	ResolveStart(ctx context.Context, workflow string, uses func(*weft.Definition) ([]string, error), cached bool) (*StartCatalog, error)

	// ListPlugins returns a page of current plugin versions ordered by name,
	// and the next cursor.
	ListPlugins(ctx context.Context, cursor string, limit int) (items []weft.PluginRecord, next string, err error)

	// DeletePlugin removes a plugin and its history. It returns ErrNotFound
	// when there is none, and an *weft.InUseError (matching ErrInUse) when a
	// non-terminal instance pins any version of it; the check and the
	// delete are one transaction, and Commit refuses to pin a plugin that
	// is not stored, so no instance can start using a deleted plugin.
	DeletePlugin(ctx context.Context, name string) error

	// PutGrants stores doc as the grants of the plugin name (which must be
	// a valid plugin name; the plugin need not exist) and returns the new
	// revision. A doc equal to the stored one changes nothing and returns
	// the stored revision. doc must have 1 to grant.MaxDocument bytes
	// (ErrInvalid otherwise); the store does not look inside it.
	//
	// Unless ifRevision is AnyRevision, the write is a compare-and-set: it
	// is refused, with a *weft.GrantsConflictError matching ErrConflict, when
	// the stored revision is another (0: nothing granted), so that an edit
	// of the grants read at that revision never overwrites a change made
	// since.
	PutGrants(ctx context.Context, plugin string, doc []byte, ifRevision uint64) (revision uint64, err error)

	// GetGrants returns the grants of a plugin name, or ErrNotFound.
	GetGrants(ctx context.Context, plugin string) (*weft.Grants, error)

	// ListGrants returns a page of grants ordered by plugin name, and the
	// next cursor.
	ListGrants(ctx context.Context, cursor string, limit int) (items []weft.Grants, next string, err error)

	// DeleteGrants removes the grants of a plugin name, or returns
	// ErrNotFound. Revisions are never reused, not even after a delete.
	DeleteGrants(ctx context.Context, plugin string) error

	// CreateSchedule stores a new schedule with its first events, in one
	// durable step, and returns it as stored: Revision 1, CreatedAt and
	// UpdatedAt now, the events' Seq and Time set (Time is always the
	// store's now). The id must pass weft.CheckID, the Document must be
	// JSON, and the State and each event's Data JSON when not empty
	// (ErrInvalid otherwise); a taken id is ErrExists.
	CreateSchedule(ctx context.Context, s *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error)

	// GetSchedule returns a schedule, or ErrNotFound.
	GetSchedule(ctx context.Context, id string) (*weft.Schedule, error)

	// ListSchedules returns a page of schedules ordered by id, and the
	// cursor of the next page ("" after the last).
	ListSchedules(ctx context.Context, cursor string, limit int) (items []weft.Schedule, next string, err error)

	// UpdateSchedule writes a schedule's Document, State, Note and Wake,
	// and appends events, in one durable step, if the stored revision is
	// s.Revision; it returns the schedule as stored (Revision + 1,
	// UpdatedAt now). It is ErrNotFound when there is no such schedule and
	// ErrConflict when another write came first (read it again). The
	// store keeps the last weft.MaxScheduleEvents events.
	UpdateSchedule(ctx context.Context, s *weft.Schedule, events []weft.ScheduleEvent) (*weft.Schedule, error)

	// DeleteSchedule removes a schedule with its events, or returns
	// ErrNotFound. The instances it started stay.
	DeleteSchedule(ctx context.Context, id string) error

	// DueSchedules returns up to limit schedules whose Wake is set and not
	// after now, the earliest Wake first (ties by id), each as GetSchedule
	// returns it: the sweep steps them without reading each again.
	DueSchedules(ctx context.Context, now time.Time, limit int) ([]weft.Schedule, error)

	// ScheduleEvents returns up to limit events of a schedule with Seq
	// greater than afterSeq, in order; ErrNotFound when there is no such
	// schedule.
	ScheduleEvents(ctx context.Context, id string, afterSeq uint64, limit int) ([]weft.ScheduleEvent, error)

	// Batch jobs (docs/operations.md, "Batch operations"): a batch's
	// record and its items, an instance each, kept together. Every batch
	// the methods return carries its Counts, exact: the store adjusts them
	// in the transactions that change the items. The checks of the
	// arguments are ValidateBatch, BatchIDs, BatchChanges and
	// BatchItemLimit (ErrInvalid).

	// CreateBatch stores a new batch with its first items, in one durable
	// step, and returns it as stored: Revision 1, CreatedAt and UpdatedAt
	// the store's now, Document, State, Actor and Wake as given. The items
	// are ids, pending, with Seq 1, 2… in the order given (an id given
	// twice is one item, at its first place), their Time now. The id must
	// pass weft.CheckID, the Document be JSON, the State JSON when not
	// empty, and ids at most weft.MaxBatchIDs (a longer selection goes on
	// with AddBatchItems): ErrInvalid otherwise. A taken id is ErrExists.
	CreateBatch(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, error)

	// GetBatch returns a batch, or ErrNotFound.
	GetBatch(ctx context.Context, id string) (*weft.Batch, error)

	// ListBatches returns a page of batches, newest first: ordered by
	// (CreatedAt, ID) descending, so batches created at the same time come
	// by id from the last. It returns the cursor of the next page ("" after
	// the last); a batch created after the listing started is not on a
	// later page.
	ListBatches(ctx context.Context, cursor string, limit int) (items []weft.Batch, next string, err error)

	// UpdateBatch writes a batch's State and Wake (not its Document nor
	// its Actor, which stay as created) if the stored revision is
	// b.Revision, and returns it as stored (Revision + 1, UpdatedAt now).
	// It is ErrNotFound when there is no such batch and ErrConflict when
	// another write came first (read it again).
	UpdateBatch(ctx context.Context, b *weft.Batch) (*weft.Batch, error)

	// DeleteBatch removes a batch with all its items, or returns
	// ErrNotFound. The instances stay.
	DeleteBatch(ctx context.Context, id string) error

	// DueBatches returns up to limit batches whose Wake is set and not
	// after now, the earliest Wake first (ties by id), each as GetBatch
	// returns it.
	DueBatches(ctx context.Context, now time.Time, limit int) ([]weft.Batch, error)

	// AddBatchItems appends ids to a batch's items, as CreateBatch does,
	// and writes b's State and Wake, in one durable step, if the stored
	// revision is b.Revision (ErrConflict otherwise, ErrNotFound for no
	// batch); it returns the batch as stored (Revision + 1) and how many
	// items it added. An instance is an item of a batch at most once: an
	// id that is one already (or earlier in ids) is left out, so that a
	// selection may list an instance twice, or be read again after a
	// crash. At most weft.MaxBatchIDs ids (ErrInvalid).
	AddBatchItems(ctx context.Context, b *weft.Batch, ids []string) (*weft.Batch, int, error)

	// BatchItems returns a page of a batch's items in Seq order: those
	// after f.AfterSeq with f.Outcome (any outcome when empty), up to
	// f.Limit (weft.ClampLimit: 100 for 0, at most 1,000). ErrNotFound
	// when there is no such batch.
	BatchItems(ctx context.Context, batch string, f weft.BatchItemFilter) ([]weft.BatchItem, error)

	// ApplyBatchItems is where each item of a batch is applied exactly
	// once. In one durable step, if the stored revision is b.Revision
	// (ErrConflict otherwise, ErrNotFound for no batch), it writes b's
	// State and Wake (Revision + 1, UpdatedAt now), and for each change
	// whose instance is a pending item of the batch:
	//   - when the instance exists, the item gets the change's Outcome and
	//     Reason, its Time now, and the change's Messages are written to
	//     the instance's inbox exactly as Deliver writes them (an id the
	//     inbox holds is not written twice; the inbox starts waiting, for
	//     WaitingInboxes);
	//   - when it does not, the item is skipped with Reason
	//     weft.BatchNotFound and the messages are dropped.
	// A change for an item that is not pending, or for an instance that is
	// not an item of the batch, is ignored with its messages; so is a
	// change for an instance that an earlier change of the call applied.
	// The counts move with the items. It returns the batch as stored. At
	// most weft.MaxBatchChanges changes; a change's outcome must not be
	// pending and its messages must be for its instance (ErrInvalid).
	ApplyBatchItems(ctx context.Context, b *weft.Batch, changes []weft.BatchChange) (*weft.Batch, error)

	// Workflow pauses (docs/operations.md, "Pause a workflow"): a paused
	// workflow's starts are created held (weft.Instance.Hold). Every start
	// reads its workflow's pause with its definition (ResolveStart,
	// StartCatalog.Paused), and both writes change the catalog as a
	// definition's save does: a create made from a StartCatalog read
	// before them carries a Generation that Commit then refuses
	// (ErrCatalogChanged), so no start that read "not paused" commits
	// after a pause without reading again.

	// PauseWorkflow records p, with Since the store's now, and returns it
	// as stored. When p.Workflow is paused already it changes nothing and
	// returns the pause stored, whose Since and Op are the first pause's.
	// The workflow need not have a definition; its name must pass
	// weft.CheckID (ErrInvalid otherwise).
	PauseWorkflow(ctx context.Context, p weft.WorkflowPause) (*weft.WorkflowPause, error)

	// UnpauseWorkflow removes the pause of the workflow name and returns
	// it, or returns ErrNotFound when it is not paused.
	UnpauseWorkflow(ctx context.Context, name string) (*weft.WorkflowPause, error)

	// WorkflowPauses returns every workflow pause, ordered by workflow
	// name (there are few: one per paused workflow).
	WorkflowPauses(ctx context.Context) ([]weft.WorkflowPause, error)

	// GetWorkflowPause returns the pause of the workflow name, or
	// ErrNotFound when it is not paused.
	GetWorkflowPause(ctx context.Context, name string) (*weft.WorkflowPause, error)

	// UpdateSlots applies op to the concurrency slots of key for id, with
	// p, at now, atomically with every other UpdateSlots of key on any node
	// (docs/flow-control.md), and returns op's Decision.
	//
	// The store keeps a key's holders and its line (as an index: a line
	// may be long) and hands op a window of its State: the holders, the
	// first slots.WindowFront(p) waiters, and id's own place in the line
	// when it waits further back, in line order. It writes back the
	// holders op returns, and the changes of the line that
	// slots.LineChanges finds (the waiters that left the window are
	// removed, those that joined are appended at the end of the whole
	// line, with their Since); so the result is that of op on the whole
	// State. It keeps p's Limit and Policy with the key (SlotKey), for
	// the sweeps, and deletes a key left Empty. When op returns an error
	// nothing is written and the error is returned as it is. A key must
	// not be empty nor longer than MaxSlotKeyLen bytes, and an id must
	// pass weft.CheckID: ErrInvalid otherwise.
	UpdateSlots(ctx context.Context, key, id string, p slots.Params, now time.Time, op SlotOp) (slots.Decision, error)

	// SlotKeys returns a page of the keys that have holders or waiters and
	// start with prefix, in key order, and the cursor of the next page (""
	// after the last).
	SlotKeys(ctx context.Context, prefix, cursor string, limit int) (items []SlotKey, next string, err error)

	// SlotLine returns a page of key's waiters in line order (first in line
	// first), and the cursor of the next page ("" after the last); an
	// empty page for a key nobody waits for.
	SlotLine(ctx context.Context, key, cursor string, limit int) (items []slots.Waiter, next string, err error)

	// Recorded attempts (docs/replay.md): an activity attempt's tape, the
	// bytes of internal/tape's Marshal, kept with its instance (in its
	// partition) and deleted with it by DeleteInstance. One index finds
	// them across instances: by plugin, newest first (FindTapes), for the
	// shadow runs of a candidate version.

	// PutTape stores data as the tape of rec.Key, with rec's summary; the
	// store sets rec.Size (len(data)) and rec.RecordedAt (its now). A tape
	// is written once: when rec.Key has one already, PutTape changes
	// nothing and returns nil, so that a write retried after a lost
	// answer is safe. ErrNotFound when the instance does not exist (a
	// tape never outlives its instance); ErrInvalid for a key that
	// TapeKey.Check refuses, or data empty or longer than
	// weft.MaxTapeData.
	PutTape(ctx context.Context, rec weft.TapeRecord, data []byte) error

	// GetTape returns the summary and the bytes of the tape of key, or
	// ErrNotFound.
	GetTape(ctx context.Context, key weft.TapeKey) (*weft.TapeRecord, []byte, error)

	// ListTapes returns the summaries of an instance's tapes, without
	// their bytes, ordered by weft.TapeKey.Compare (step, execution,
	// attempt); ErrNotFound when there is no such instance.
	ListTapes(ctx context.Context, instanceID string) ([]weft.TapeRecord, error)

	// FindTapes returns the summaries of the tapes of plugin q.Plugin
	// across every instance, the newest first (RecordedAt descending;
	// tapes recorded at the same time by weft.TapeKey.Compare), of the
	// instances of workflow q.Workflow only when it is set, recorded at
	// or after q.Since only when it is set, at most q.Limit of them: the
	// attempts a shadow run replays. It reads an index by plugin, not
	// every instance. A plugin without tapes finds none and no error;
	// ErrInvalid for a query that q.Check refuses.
	FindTapes(ctx context.Context, q weft.TapeQuery) ([]weft.TapeRecord, error)

	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}

// ValidateTape reports what PutTape refuses in rec and data: a key that
// weft.TapeKey.Check refuses, no data, more than weft.MaxTapeData bytes,
// or an outcome that is not one of weft's. The error matches ErrInvalid
// and names the tape. Implementations call it before writing.
func ValidateTape(rec weft.TapeRecord, data []byte) error {
	if err := rec.Key.Check(); err != nil {
		return err
	}
	switch {
	case len(data) == 0:
		return Invalid("tape %s: no data", rec.Key)
	case len(data) > weft.MaxTapeData:
		return Invalid("tape %s: %d bytes, more than %d", rec.Key, len(data), weft.MaxTapeData)
	}
	switch rec.Outcome {
	case weft.TapeCompleted, weft.TapeFailed, weft.TapeTimedOut, weft.TapeCancelled:
	default:
		return Invalid("tape %s: unknown outcome %q", rec.Key, rec.Outcome)
	}
	return nil
}
