package apiv1

import (
	"encoding/json"
	"time"
)

// Status is where an instance is in its life, as the API shows it.
type Status string

// The seven statuses of an instance (openapi.json's InstanceStatus).
const (
	StatusPending   Status = "pending"
	StatusRunning   Status = "running"
	StatusSuspended Status = "suspended"
	// StatusPaused: an operator paused the instance; it begins no step
	// until resumed (docs/operations.md, "Pause and resume").
	StatusPaused    Status = "paused"
	StatusCompleted Status = "completed"
	StatusFailed    Status = "failed"
	StatusCancelled Status = "cancelled"
)

// Terminal reports whether s is completed, failed or cancelled: the
// instance will not run again.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// Instance is a workflow instance as the API shows it.
type Instance struct {
	ID       string `json:"id"`
	Workflow string `json:"workflow"`
	Version  int    `json:"version"`
	Status   Status `json:"status"`
	// Input, Output and Vars are JSON documents, null when absent.
	Input  json.RawMessage `json:"input"`
	Output json.RawMessage `json:"output"`
	Vars   json.RawMessage `json:"vars"`
	// Error is why the instance did not complete: set when it failed or
	// was cancelled, null otherwise.
	Error *Failure `json:"error"`
	// Plugins are the plugin versions the instance pinned, by name.
	Plugins map[string]string `json:"plugins,omitempty"`
	// Parent is set on a child workflow's instance.
	Parent    *Parent   `json:"parent,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	// DeleteAfter is when a finished instance will be deleted by the
	// retention sweep; absent while it runs, and when it is kept forever.
	DeleteAfter time.Time `json:"delete_after,omitzero"`
	// Priority is the instance's priority in the ready queue, from 1
	// (served first) to 5 (served last): its start's, else its
	// definition's, else 3; a child's is its parent's. Decided when the
	// instance is created, and always present.
	Priority int `json:"priority"`
	// FairnessKey is the lane (usually a tenant) in which the instance
	// takes turns with the other lanes of its priority, from its
	// definition's fairness.key; absent for the shared lane, "".
	FairnessKey string `json:"fairness_key,omitempty"`
	// FairnessWeight is how many instances its lane hands out in a turn
	// (1 to 1000), from its definition's fairness.weight; present with
	// FairnessKey.
	FairnessWeight int `json:"fairness_weight,omitempty"`
	// Concurrency is set when the instance's workflow limits how many of
	// its instances run at once per key (docs/flow-control.md): its key,
	// and since when it waits for a slot.
	Concurrency *Concurrency `json:"concurrency,omitempty"`
	// Search holds the instance's search attributes by name, as of its
	// last commit (docs/operations.md, "Search"): a string, a number, a
	// bool, a time as an RFC 3339 string in UTC, or a list of strings,
	// after its type (GET /v1/search-attributes). Absent when it has none.
	Search map[string]any `json:"search,omitempty"`
	// Hold is set on a pending instance created while its workflow was
	// paused (docs/operations.md, "Pause a workflow"): it starts when the
	// workflow is resumed. In lists too.
	Hold *Hold `json:"hold,omitempty"`
	// WaitingOn is set when one instance is shown, and in lists for a
	// suspended instance.
	WaitingOn *WaitingOn `json:"waiting_on,omitempty"`
	// TraceID is the instance's trace (32 lowercase hex digits), in which
	// the host sent the spans of its requests, runs, steps and attempts,
	// for an operator to find it in a trace viewer. Absent when the
	// instance was created with tracing off, and when its trace is not
	// sampled: such a trace has no spans, and an id pointing nowhere
	// would mislead.
	TraceID string `json:"trace_id,omitempty"`
	// Paused is set when one instance is shown (and in the answers of a
	// pause and a resume) while it is paused: by whom, why, since when,
	// and what it holds for its resume. An instance paused while an
	// attempt of it runs has it with the status running, until the
	// attempt ends. Never in lists, which do not read instances' states.
	Paused *Paused `json:"paused,omitempty"`
}

// Paused is an instance's pause (docs/operations.md, "Pause and resume").
type Paused struct {
	// Since is when the pause applied: when the instance stopped
	// beginning steps.
	Since time.Time `json:"since"`
	// Actor is who paused it (an API token's name: docs/operations.md,
	// "Audit"), Reason why, and Batch the batch job that did, if one
	// did.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	Batch  string `json:"batch,omitempty"`
	// Held counts the timers' fires and events that came meanwhile, kept
	// to be applied, in the order they came, on resume.
	Held int `json:"held"`
}

// Terminal reports whether the instance is completed, failed or cancelled.
func (i *Instance) Terminal() bool { return i.Status.Terminal() }

// Failure is why an instance failed (the code of its step's failure), or
// was cancelled (the code cancelled, and the reason as Message).
type Failure struct {
	Code    string          `json:"code"`
	Message string          `json:"message,omitempty"`
	Details json.RawMessage `json:"details,omitempty"`
	// Step is the path of the step that failed (steps[1].then[0]), when a
	// step did.
	Step string `json:"step,omitempty"`
}

// Parent names the parent instance, and its step, of a child workflow's
// instance.
type Parent struct {
	InstanceID string `json:"instance_id"`
	StepID     string `json:"step_id"`
}

// WaitingOn is what a suspended instance waits for; both lists are empty,
// not null, for an instance that waits on nothing.
type WaitingOn struct {
	Bookmarks []Bookmark `json:"bookmarks"`
	Timers    []Timer    `json:"timers"`
}

// Bookmark is a wait for an event with a correlation key.
type Bookmark struct {
	Event    string `json:"event"`
	Key      string `json:"key"`
	StepPath string `json:"step_path"`
}

// Timer is a durable timer of an instance.
type Timer struct {
	ID   string    `json:"id"`
	Due  time.Time `json:"due"`
	Kind TimerKind `json:"kind,omitempty"`
}

// TimerKind says what a timer ends.
type TimerKind string

// The kinds of timer.
const (
	// TimerDelay ends a delay step.
	TimerDelay TimerKind = "delay"
	// TimerRetry ends a retry's backoff.
	TimerRetry TimerKind = "retry"
	// TimerWaitTimeout ends a wait step's wait for its event.
	TimerWaitTimeout TimerKind = "wait_timeout"
)

// Counts is GET /v1/counts/instances's answer: the instances by status,
// every status present.
type Counts struct {
	Total    int            `json:"total"`
	ByStatus map[Status]int `json:"by_status"`
}

// StartRequest is the body of POST /v1/workflows/{name}/instances.
type StartRequest struct {
	// Input is the instance's input, a JSON document; nil is null.
	Input json.RawMessage `json:"input,omitempty"`
	// ID is an optional client-chosen id that makes the start idempotent.
	ID string `json:"id,omitempty"`
	// Priority, when not 0, is the instance's priority in the ready
	// queue, from 1 (served first) to 5 (served last), before the one its
	// definition computes; 0 leaves the definition's (3 when it sets
	// none). A start answered with an existing instance (ID) keeps that
	// instance's.
	Priority int `json:"priority,omitempty"`
}

// MaxWait is the longest wait (?wait=) the API accepts in one request;
// ask again to wait longer.
const MaxWait = 5 * time.Minute

// Until is what a wait on an instance (?until=, with ?wait=) waits for.
type Until string

// The values of ?until=.
const (
	// UntilEnded waits until the instance has completed, failed or been
	// cancelled: through its delays and retry backoffs, during which it
	// is suspended. The default.
	UntilEnded Until = "ended"
	// UntilSuspended waits until the instance suspends (waiting for an
	// event or a timer) or ends.
	UntilSuspended Until = "suspended"
)

// CancelRequest is the optional body of POST /v1/instances/{id}/cancel.
type CancelRequest struct {
	// Reason becomes the message of the cancelled instance's error.
	Reason string `json:"reason,omitempty"`
}

// RetryRequest is the optional body of POST /v1/instances/{id}/retry.
type RetryRequest struct {
	// Reason is recorded in the instance_retried history entry.
	Reason string `json:"reason,omitempty"`
}

// InstancePauseRequest is the optional body of POST
// /v1/instances/{id}/pause.
type InstancePauseRequest struct {
	// Reason is recorded in the instance_paused history entry and shown
	// with the pause.
	Reason string `json:"reason,omitempty"`
}

// InstanceResumeRequest is the optional body of POST
// /v1/instances/{id}/resume.
type InstanceResumeRequest struct {
	// Reason is recorded in the instance_resumed history entry.
	Reason string `json:"reason,omitempty"`
}

// MaxBulk bounds the ids of one bulk request.
const MaxBulk = 1000

// BulkCancelRequest is the body of POST /v1/instances/cancel.
type BulkCancelRequest struct {
	// IDs names 1 to MaxBulk instances.
	IDs    []string `json:"ids"`
	Reason string   `json:"reason,omitempty"`
}

// BulkOutcome is what a bulk request did to one instance; the answer is
// a Page of them, in the order of the request's ids.
type BulkOutcome struct {
	ID      string  `json:"id"`
	Outcome Outcome `json:"outcome"`
	Detail  string  `json:"detail,omitempty"`
}

// Outcome is what a bulk request did to one instance.
type Outcome string

// The outcomes of a bulk cancel, per instance.
const (
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeFinished: the instance had ended already.
	OutcomeFinished Outcome = "finished"
	OutcomeNotFound Outcome = "not_found"
	// OutcomeError: the cancel failed, or was not tried; Detail says why.
	OutcomeError Outcome = "error"
)
