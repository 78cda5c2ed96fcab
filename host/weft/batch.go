package weft

import (
	"encoding/json"
	"time"
)

// Batch is a batch job as the store keeps it: one operation (BatchOp) over
// a selection of instances — a query or a list of ids — applied durably by
// the host, item by item, at a rate, surviving a node's death with each
// instance operated on exactly once (docs/operations.md, "Batch
// operations"). The store looks inside neither Document nor State
// (internal/batch reads them); it keeps Counts with the items, in the same
// transactions.
type Batch struct {
	// ID names the batch: "b-" and a unique suffix, by the rules of
	// CheckID.
	ID string `json:"id"`
	// Document is the batch's canonical JSON document: its operation, the
	// selection, the operation's arguments, the rate, whether it waits
	// for a confirmation, whether it is a dry run.
	Document json.RawMessage `json:"document"`
	// State is the stepper's state: its phase, cursors, error and who
	// cancelled it.
	State json.RawMessage `json:"state"`
	// Actor is who started the batch (Operation.Actor).
	Actor string `json:"actor,omitempty"`
	// Wake is when the stepper must look at the batch next; zero when
	// nothing is due until an operator acts (waiting for a confirmation).
	Wake time.Time `json:"wake,omitzero"`
	// Revision is 1 when the batch is created and +1 at every write; a
	// write names the revision it read and is refused if another write
	// came first.
	Revision uint64 `json:"revision"`
	// Counts counts the batch's items by outcome, kept exact by the store.
	Counts BatchCounts `json:"counts"`
	// CreatedAt and UpdatedAt are set by the store.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// BatchOp is what a batch does to each instance.
type BatchOp string

// The operations of a batch.
const (
	BatchCancel BatchOp = "cancel"
	// BatchRetry continues each failed instance from its failed step.
	BatchRetry  BatchOp = "retry"
	BatchPause  BatchOp = "pause"
	BatchResume BatchOp = "resume"
	// BatchDelete deletes each finished instance.
	BatchDelete BatchOp = "delete"
	// BatchSignal sends an event to each instance waiting for it.
	BatchSignal BatchOp = "signal"
	// BatchMigrate moves each instance to another version of its workflow
	// or of its plugins.
	BatchMigrate BatchOp = "migrate"
	// BatchReset runs each instance again from a named step.
	BatchReset BatchOp = "reset"
	// BatchRelease releases the starts a paused workflow held; the host
	// starts it when the workflow is resumed.
	BatchRelease BatchOp = "release"
)

// BatchOps lists the operations of a batch.
func BatchOps() []BatchOp {
	return []BatchOp{BatchCancel, BatchRetry, BatchPause, BatchResume, BatchDelete, BatchSignal, BatchMigrate, BatchReset, BatchRelease}
}

// BatchOutcome is what became of one item of a batch.
type BatchOutcome string

// The outcomes of a batch item.
const (
	// BatchPending: not applied yet.
	BatchPending BatchOutcome = "pending"
	// BatchDone: the operation was delivered to the instance (its
	// message is in the instance's inbox, or the instance was deleted).
	BatchDone BatchOutcome = "done"
	// BatchSkipped: the instance was not in a state the operation applies
	// to (finished, for a cancel) or is gone; Reason says which.
	BatchSkipped BatchOutcome = "skipped"
	// BatchFailed: the operation could not be delivered (Reason says why).
	BatchFailed BatchOutcome = "failed"
	// BatchCan and BatchCannot: a dry run's answer, whether the operation
	// would apply (a migrate's plan).
	BatchCan    BatchOutcome = "can"
	BatchCannot BatchOutcome = "cannot"
)

// BatchOutcomes lists the outcomes of a batch item.
func BatchOutcomes() []BatchOutcome {
	return []BatchOutcome{BatchPending, BatchDone, BatchSkipped, BatchFailed, BatchCan, BatchCannot}
}

// BatchCounts counts a batch's items by outcome; an outcome no item has is
// absent.
type BatchCounts map[BatchOutcome]int

// Total is the number of items counted.
func (c BatchCounts) Total() int {
	n := 0
	for _, v := range c {
		n += v
	}
	return n
}

// BatchItem is one instance of a batch and what became of it.
type BatchItem struct {
	Batch      string `json:"batch"`
	InstanceID string `json:"instance_id"`
	// Seq orders a batch's items from 1, in the order they were selected.
	Seq     uint64       `json:"seq"`
	Outcome BatchOutcome `json:"outcome"`
	Reason  string       `json:"reason,omitempty"`
	// Time is when the item got its outcome (when it was selected, while
	// pending); set by the store.
	Time time.Time `json:"time"`
}

// BatchItemFilter selects a page of a batch's items.
type BatchItemFilter struct {
	// Outcome keeps the items with it; "" keeps every item.
	Outcome BatchOutcome
	// AfterSeq keeps the items after it, in Seq order.
	AfterSeq uint64
	// Limit caps the page; 0 is the store's default.
	Limit int
}

// BatchChange is the outcome of one pending item of a batch and the
// messages that carry its operation to the instance, written together or
// not at all (store.ApplyBatchItems): the point where an item is applied
// exactly once.
type BatchChange struct {
	InstanceID string
	Outcome    BatchOutcome
	Reason     string
	// Messages go to the instance's inbox, as Deliver writes them, only
	// if the item is still pending.
	Messages []Message
}

// Bounds of one call of the store's batch methods, so that no write holds
// the embedded store's write lock, or blocks Redis, for long.
const (
	// MaxBatchIDs is how many instance ids one CreateBatch or
	// AddBatchItems writes at most: a longer list goes in several calls.
	MaxBatchIDs = 10000
	// MaxBatchChanges is how many items one ApplyBatchItems applies at
	// most: the stepper applies a batch in chunks of at most this many.
	MaxBatchChanges = 500
)

// BatchNotFound is the Reason of an item that ApplyBatchItems skipped
// because its instance no longer exists.
const BatchNotFound = "not found"

// BatchError lists every problem of a batch document, each with its JSON
// path (args.event, ids[3]), so that the API answers them all at once. It
// matches ErrInvalid.
type BatchError struct {
	Problems []Problem
}

// Error implements error: every problem on one line.
func (e *BatchError) Error() string { return problemsError("invalid batch", "", e.Problems) }

// Is reports whether target is ErrInvalid.
func (e *BatchError) Is(target error) bool { return target == ErrInvalid }
