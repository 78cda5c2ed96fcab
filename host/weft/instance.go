package weft

import (
	"encoding/json"
	"time"
)

// Status is where an instance is in its life. The zero value is not a valid
// status.
type Status string

// The seven statuses of an instance, as the API shows them (README.md,
// "Concepts").
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusSuspended Status = "suspended"
	// StatusPaused: an operator paused the instance; it begins no step
	// until resumed, and keeps the timers and events that arrive meanwhile
	// for then (docs/operations.md, "Pause and resume").
	StatusPaused    Status = "paused"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Statuses returns the seven statuses, in the order of an instance's life.
func Statuses() []Status {
	return []Status{StatusPending, StatusRunning, StatusSuspended, StatusPaused, StatusCompleted, StatusFailed, StatusCancelled}
}

// Valid reports whether s is one of the seven statuses.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusRunning, StatusSuspended, StatusPaused, StatusCompleted, StatusFailed, StatusCancelled:
		return true
	}
	return false
}

// Terminal reports whether s is completed, failed or cancelled: the
// instance will not run again, pins no plugin, and is never reported by
// ExpiredLeases.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Instance is one workflow instance as stored. The store sets Rev, Fence,
// CreatedAt and UpdatedAt; everything else is the engine's.
type Instance struct {
	// ID is the instance's id, chosen by the engine or the client. Not
	// empty, at most MaxIDLen bytes.
	ID string `json:"id"`
	// Workflow is the definition's name; Version its version.
	Workflow string `json:"workflow"`
	Version  int    `json:"version"`
	// Status is one of the seven statuses.
	Status Status `json:"status"`
	// Input, Output and Vars are JSON values (nil when absent). They come
	// back compacted.
	Input  json.RawMessage `json:"input,omitempty"`
	Output json.RawMessage `json:"output,omitempty"`
	Vars   json.RawMessage `json:"vars,omitempty"`
	// Error is why the instance failed, nil otherwise.
	Error *Failure `json:"error,omitempty"`
	// State is the runner's state, opaque to the store. It is not returned
	// by ListInstances.
	State []byte `json:"-"`
	// Plugins pins each plugin the instance uses (name → version hash).
	// While the instance is not terminal the plugins cannot be deleted.
	Plugins map[string]string `json:"plugins,omitempty"`
	// Parent is set on child workflows.
	Parent *ParentRef `json:"parent,omitempty"`
	// Persistence is the instance's persistence strategy (lazy, activity).
	Persistence string `json:"persistence,omitempty"`
	// Trace is where the instance's spans go, set when it was created
	// while tracing was on; nil otherwise.
	Trace *Trace `json:"trace,omitempty"`
	// Order is the instance's place in the ready queue: its priority and
	// fairness key, decided when it is created.
	Order
	// Concurrency is set when the instance's workflow limits how many of
	// its instances run at once per key: its key, and since when it waits
	// for a slot. Nil otherwise.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	// Search holds the instance's search attributes (its definition's
	// `search`, evaluated by the engine at each commit); the stores index
	// them for InstanceFilter.Search.
	Search SearchAttributes `json:"search,omitempty"`
	// Hold is set on an instance created while its workflow was paused:
	// it stays pending, not queued, until released (docs/operations.md,
	// "Pause a workflow").
	Hold *Hold `json:"hold,omitempty"`
	// CreatedAt is set by the store when the instance is created (kept when
	// a create supplies it, as an import does); UpdatedAt on every Commit
	// (both to Commit.At when it is given).
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// Rev is the revision, the compare-and-set token: 1 after the create,
	// +1 on every Commit. RenewLeases does not change it.
	Rev uint64 `json:"rev"`
	// Fence is the fencing token of the last writer (Commit.Fence).
	Fence uint64 `json:"fence"`
	// Lease says which node runs the instance; zero when none does.
	Lease Lease `json:"lease"`
	// DeleteAfter is when a finished instance may be deleted with
	// everything it left (history, bookmarks, timers, inbox, heartbeats);
	// zero keeps it until someone deletes it. The engine sets it in the
	// commit that finishes the instance, so that a later change of the
	// retention settings does not rewrite what was decided then. Only a
	// terminal instance may have one (ErrInvalid otherwise), and the store
	// indexes it for ExpiredInstances.
	DeleteAfter time.Time `json:"delete_after,omitzero"`
	// InboxWaiting is whether the instance's inbox held a message when
	// GetInstance read it, so that a run that finds it empty need not read
	// it (a message that comes later wakes the run, and a commit with
	// Commit.Drains refuses to end a run that has not seen it). Other
	// reads leave it false; a Commit ignores it.
	InboxWaiting bool `json:"-"`
}

// Failure is why an instance failed, or was cancelled (the code
// "cancelled" and the reason given), as the runner decides it and the store
// keeps it; a child step's failure carries its child's.
type Failure struct {
	Code    string          `json:"code"`
	Message string          `json:"message,omitempty"`
	Details json.RawMessage `json:"details,omitempty"`
	// Step is the path of the step that failed (steps[1].then[0]), when a
	// step did.
	Step string `json:"step,omitempty"`
}

// ParentRef names the step of the parent instance that waits for a child
// workflow.
type ParentRef struct {
	InstanceID string `json:"instance_id"`
	// StepID is the id of the parent's step that started the child.
	StepID string `json:"step_id"`
	// Token is the parent runner's name for the wait, which the child's
	// end is sent to. Children stored before it was kept have it in
	// StepID (the engine reads either).
	Token string `json:"token,omitempty"`
	// Order is the parent's, for queueing the parent when the child
	// ends.
	Order Order `json:"order,omitzero"`
}

// Lease records which node (and which boot of it) runs an instance, until
// when. Recovery takes over instances whose lease expired, never ones
// merely not updated for a while (docs/architecture.md, "Locks and
// fencing").
type Lease struct {
	// Node and Boot identify the owner; Boot changes on every start of the
	// node's process, so a restarted node does not mistake its previous
	// life's leases for its own.
	Node string `json:"node,omitempty"`
	Boot string `json:"boot,omitempty"`
	// Expiry is when the lease ends unless renewed.
	Expiry time.Time `json:"expiry,omitzero"`
}

// IsZero reports whether the lease is empty: no node owns the instance.
func (l Lease) IsZero() bool { return l.Node == "" }

// Held reports whether the lease is owned by node and boot.
func (l Lease) Held(node, boot string) bool { return l.Node != "" && l.Node == node && l.Boot == boot }

// Expired reports whether the lease is set and its expiry is not after
// now.
func (l Lease) Expired(now time.Time) bool { return !l.IsZero() && !l.Expiry.After(now) }

// InstanceFilter selects instances for ListInstances.
type InstanceFilter struct {
	// Workflow, when set, keeps instances of that definition name.
	Workflow string
	// Status, when set, keeps instances with that status.
	Status Status
	// CreatedFrom, when not zero, keeps instances created at or after it;
	// CreatedBefore, when not zero, those created before it.
	CreatedFrom, CreatedBefore time.Time
	// Search, when set, reads the instances through the index of one
	// search attribute, those whose value is in the range, in the index's
	// order: by value (by keyword for a keywords attribute), then by
	// (CreatedAt, ID), the other way round when NewestFirst. The other
	// fields still filter.
	Search *SearchRange
	// Match, when set, keeps only the instances it accepts (the rest of a
	// query, evaluated on each instance read, without its State).
	Match func(*Instance) bool
	// Examine bounds the instances one call reads to fill its page when
	// Match or Search filter them (0: MaxExamine): a page may then come
	// back shorter than Limit, even empty, with a cursor to read on.
	Examine int
	// NewestFirst lists in the reverse order: the newest first.
	NewestFirst bool
	// Limit bounds the page: see ClampLimit.
	Limit int
	// Cursor is the NextCursor of the previous page, empty for the first.
	Cursor string
}

// HistoryEntry is one entry of an instance's history.
type HistoryEntry struct {
	// Seq is assigned by the store: 1, 2, 3… per instance.
	Seq uint64 `json:"seq"`
	// Time is when it happened; the store's clock when left zero.
	Time     time.Time   `json:"time"`
	Type     HistoryType `json:"type"`
	StepPath string      `json:"step_path,omitempty"`
	Attempt  int         `json:"attempt,omitempty"`
	Node     string      `json:"node,omitempty"`
	// Actor is who asked for what the entry records, on the entries of an
	// operator's action (instance_cancelled, instance_retried,
	// instance_imported, the event_ignored of a cancel or a retry that
	// came too late): an API token's name, or one of ActorAnonymous,
	// ActorEngine, ActorScheduler (see Operation). Empty on the rest.
	Actor string          `json:"actor,omitempty"`
	Data  json.RawMessage `json:"data,omitempty"`
}
