package apiv1

import (
	"encoding/json"
	"time"
)

// BatchRequest is the body of POST /v1/batches: one operation applied to
// many instances, those a query matches or those listed by id, exactly
// one of the two (docs/operations.md, "Batch operations"). The host reads
// it strictly: every problem (an unknown field, an argument of another
// operation, an id given twice) comes back at once, each with its path
// (args.event, ids[3]).
type BatchRequest struct {
	// Op is the operation; delete and migrate need the admin role.
	Op BatchOp `json:"op"`
	// Query is an instance query (GET /v1/instances?q=): the batch takes
	// the instances it matches that were created before the batch.
	Query string `json:"query,omitempty"`
	// IDs lists the instances by id, 1 to MaxBatchIDs of them, none
	// twice, applied in this order.
	IDs []string `json:"ids,omitempty"`
	// Reason is why; each instance's history entry records it.
	Reason string `json:"reason,omitempty"`
	// Rate bounds the instances applied per second: nil for the default
	// (1,000), 0 for no limit.
	Rate *float64 `json:"rate,omitempty"`
	// Hold stops the batch once its instances are selected, with their
	// count, until POST /v1/batches/{id}/confirm.
	Hold bool `json:"hold,omitempty"`
	// DryRun, for a migrate only, says per instance whether it can move
	// (outcome can or cannot) and moves none.
	DryRun bool `json:"dry_run,omitempty"`
	// Args are the operation's arguments: signal, migrate and reset take
	// some, the others none.
	Args *BatchArgs `json:"args,omitempty"`
}

// MaxBatchIDs bounds the ids of one batch (BatchRequest.IDs): select more
// with a query.
const MaxBatchIDs = 10000

// BatchArgs are the arguments of a batch's operation.
type BatchArgs struct {
	// Event, Key and Payload are a signal's: the event sent to each
	// instance's waits for it (only those with Key, when given).
	Event   string          `json:"event,omitempty"`
	Key     string          `json:"key,omitempty"`
	Payload json.RawMessage `json:"payload,omitempty"`
	// ToVersion (0: the latest), Plugins (name → a version's sha256),
	// Retry and Resume are a migrate's, as MigrateRequest's.
	ToVersion int               `json:"to_version,omitempty"`
	Plugins   map[string]string `json:"plugins,omitempty"`
	Retry     bool              `json:"retry,omitempty"`
	Resume    bool              `json:"resume,omitempty"`
	// Step is a reset's: the top-level step each instance runs again
	// from.
	Step string `json:"step,omitempty"`
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
	// BatchRelease is the host's own, never a request's: it releases the
	// starts a paused workflow held, when the workflow is resumed.
	BatchRelease BatchOp = "release"
)

// BatchPhase is where a batch is in its life.
type BatchPhase string

// The phases of a batch.
const (
	// PhaseSelecting: the host reads the query's matches into the items.
	PhaseSelecting BatchPhase = "selecting"
	// PhaseSelected: the items are selected (Matched of them) and the
	// batch, started with hold, waits for a confirmation.
	PhaseSelected BatchPhase = "selected"
	// PhaseApplying: the host applies the operation, at the batch's rate.
	PhaseApplying BatchPhase = "applying"
	// PhaseDone, PhaseCancelled and PhaseFailed are finished: every item
	// has its outcome; an operator cancelled the batch (the items not
	// applied stay pending); it stopped on an error (Error).
	PhaseDone      BatchPhase = "done"
	PhaseCancelled BatchPhase = "cancelled"
	PhaseFailed    BatchPhase = "failed"
)

// Finished reports whether a batch in phase p applies nothing more.
func (p BatchPhase) Finished() bool {
	return p == PhaseDone || p == PhaseCancelled || p == PhaseFailed
}

// BatchOutcome is what became of one item of a batch.
type BatchOutcome string

// The outcomes of a batch item.
const (
	// ItemPending: not applied yet.
	ItemPending BatchOutcome = "pending"
	// ItemDone: the operation was delivered (the instance applies it
	// when it runs next), or the instance deleted.
	ItemDone BatchOutcome = "done"
	// ItemSkipped: the operation does not apply to the instance (a
	// cancel of a finished one), or it is gone; the reason says which.
	ItemSkipped BatchOutcome = "skipped"
	// ItemFailed: the operation could not be delivered.
	ItemFailed BatchOutcome = "failed"
	// ItemCan and ItemCannot: a dry run's answers.
	ItemCan    BatchOutcome = "can"
	ItemCannot BatchOutcome = "cannot"
)

// Batch is a batch as the API shows it: what it was asked to do, by whom,
// and how far it is.
type Batch struct {
	// ID is "b-" and a unique suffix.
	ID string  `json:"id"`
	Op BatchOp `json:"op"`
	// Query is the batch's query in its canonical form; absent for a
	// batch of listed ids, which IDs counts.
	Query  string `json:"query,omitempty"`
	IDs    int    `json:"ids,omitempty"`
	Reason string `json:"reason"`
	// Rate is the instances applied per second; 0 for no limit.
	Rate   float64 `json:"rate"`
	Hold   bool    `json:"hold"`
	DryRun bool    `json:"dry_run"`
	// Args are the operation's arguments; absent for one that takes none.
	Args *BatchArgs `json:"args,omitempty"`
	// Actor is who started it: the request's token's name.
	Actor string     `json:"actor"`
	Phase BatchPhase `json:"phase"`
	// Matched is how many instances the selection found (so far, while
	// it is selecting).
	Matched int `json:"matched"`
	// Counts counts the items by outcome, each outcome present.
	Counts map[BatchOutcome]int `json:"counts"`
	// Error says why a failed batch failed.
	Error string `json:"error,omitempty"`
	// Cancelled says who cancelled the batch, why and when.
	Cancelled *BatchCancellation `json:"cancelled,omitempty"`
	CreatedAt time.Time          `json:"created_at"`
	UpdatedAt time.Time          `json:"updated_at"`
	StartedAt time.Time          `json:"started_at"`
	// FinishedAt is when it was done, cancelled or failed.
	FinishedAt time.Time `json:"finished_at,omitzero"`
	// NextStepAt is when the host looks at the batch next (its rate's
	// next turn, or when a finished batch is deleted); absent while it
	// waits for a confirmation.
	NextStepAt time.Time `json:"next_step_at,omitzero"`
}

// BatchCancellation is who cancelled a batch, why and when.
type BatchCancellation struct {
	Actor  string    `json:"actor"`
	Reason string    `json:"reason,omitempty"`
	At     time.Time `json:"at"`
}

// BatchItem is one instance of a batch and what became of it
// (GET /v1/batches/{id}/items).
type BatchItem struct {
	InstanceID string `json:"instance_id"`
	// Seq orders a batch's items from 1, in the order they were
	// selected: the next page's ?after=.
	Seq     uint64       `json:"seq"`
	Outcome BatchOutcome `json:"outcome"`
	// Reason says why an item was skipped or failed, or what a dry run
	// found.
	Reason string `json:"reason,omitempty"`
	// Time is when the item got its outcome (when it was selected, while
	// pending).
	Time time.Time `json:"time"`
}

// BatchCancelRequest is the optional body of
// POST /v1/batches/{id}/cancel.
type BatchCancelRequest struct {
	// Reason is why, shown with the batch. Default: cancelled through the
	// API.
	Reason string `json:"reason,omitempty"`
}
