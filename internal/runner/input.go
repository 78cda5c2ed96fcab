package runner

import (
	"encoding/json"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/retry"
)

// Context is what Apply needs from outside: the instance's id, the time, and
// a random source for retry jitter. Seed Rand per instance and event so that
// a replay makes the same decisions.
type Context struct {
	InstanceID string
	Now        time.Time
	Rand       func() float64
	// AttemptDataLimit caps, in bytes of JSON, an attempt's input and
	// output as its history records keep them (activity_scheduled's
	// input, activity_completed's output); a larger one is recorded by its
	// size only (input_omitted_bytes, output_omitted_bytes), never cut.
	// 0 records neither.
	AttemptDataLimit int
	// VarsLimit caps, in bytes of JSON, the copy of the variables that
	// a top-level step's step_started record keeps when they changed
	// since the last copy (instance_started's keeps the empty ones), for
	// a Reset to that step; a larger copy is recorded by its size only
	// (vars_omitted_bytes), and a reset to the step is refused. 0
	// records none.
	VarsLimit int
}

// Input is an input to Apply.
type Input interface{ input() }

// Start begins an instance. Input is its input as JSON, as the instance
// stores it (nil for none); the state keeps it, and the caller must not
// change it afterwards.
type Start struct{ Input json.RawMessage }

// ActivityCompleted is an attempt's output.
type ActivityCompleted struct {
	Token  string
	Output any
	// OutputJSON is Output as the attempt's record may keep it
	// (Context.AttemptDataLimit): the output as the plugin runtime
	// returned it, secrets masked; nil has Output encoded for it.
	OutputJSON json.RawMessage
	// Requests lists the attempt's outbound HTTP requests (a JSON array),
	// for its record; empty when it made none.
	Requests json.RawMessage
	// Logs are the attempt's log lines, for its record.
	Logs weft.AttemptLogs
	// Path and Attempt are where the attempt ran, as its Invoke said: an
	// end the instance no longer waits for (it was cancelled, failed
	// elsewhere or finished meanwhile) is recorded there as refused or
	// ignored, with its logs, which would be lost otherwise.
	Path    string
	Attempt int
}

// ActivityFailed is an attempt's failure.
type ActivityFailed struct {
	Token string
	// Cause is what the retry policy decides on; the code, Message and
	// Details become the instance's failure when the step is not retried.
	Cause   retry.Cause
	Message string
	Details json.RawMessage
	// LastHeartbeat is the details the attempt last reported; they are
	// handed to the next attempt.
	LastHeartbeat json.RawMessage
	// Requests, Logs, Path and Attempt are as in ActivityCompleted.
	Requests json.RawMessage
	Logs     weft.AttemptLogs
	Path     string
	Attempt  int
}

// TimerFired is a timer armed with ArmTimer coming due.
type TimerFired struct{ Token string }

// StimulusDelivered resumes a bookmark. Op, when set, is the operator's
// action that sent it (a batch's signal): bookmark_resumed records it.
type StimulusDelivered struct {
	Token   string
	Payload any
	Op      *weft.Operation
}

// ChildCompleted is a child instance's output.
type ChildCompleted struct {
	Token  string
	Output any
}

// ChildFailed is a child instance's failure (or cancellation).
type ChildFailed struct {
	Token   string
	Failure weft.Failure
}

// Cancel cancels the instance. Op says who asked and why: its reason is
// the instance's error message, and the instance_cancelled entry records
// its actor, reason, batch and time (weft.Operation.Data).
type Cancel struct{ Op weft.Operation }

// ChildID is the id of the child instance a parent's child step starts
// with token: deterministic, so that a parent replayed after a crash asks
// for the same child, and the store's idempotent create absorbs the
// repeat.
func ChildID(parent, token string) string { return parent + "." + token }

// Retry continues a failed instance from where its failure stopped it:
// the step that failed, and every step cancelled with it (a parallel's
// other branches, a wait, a child), start again; an activity from attempt
// 1 with a fresh schedule-to-close and its idempotency key unchanged. The
// variables are as the failure left them. An instance that has not failed
// records the input as ignored. Op says who asked, and why: the
// instance_retried entry records it as Cancel's entry does.
type Retry struct{ Op weft.Operation }

// Pause pauses the instance (docs/operations.md, "Pause and resume"): it
// begins no step from then on, not even its first or the next of a
// branch, and does not complete; an attempt in flight completes and is
// recorded, and a failure it ends with fails the instance as ever. Timer
// fires, stimuli and children's ends that arrive meanwhile are held in
// the state (State.Held) and applied by Resume, in the order they came;
// an attempt deferred for its step's concurrency limit leaves the key's
// line, to ask again on resume. The instance_paused entry records Op. A
// paused instance's status is paused once nothing is in flight.
type Pause struct{ Op weft.Operation }

// Resume resumes a paused instance: the attempts a Recover found lost
// while it was paused are invoked again, the held inputs applied in the
// order they came, the attempts deferred for a concurrency limit ask for
// their slot again, and the instance goes on. The instance_resumed entry
// records Op. A Resume of an instance that is not paused, or a Pause of
// one that is, is recorded as ignored.
type Resume struct{ Op weft.Operation }

// Reset runs the instance again from Step, a step of the definition's
// top-level list, with Vars, the variables it had when that step began
// (the step_started records keep them: Context.VarsLimit): every
// outstanding operation is cancelled, the error and output forgotten,
// and the step begins anew — a new execution, so new idempotency keys:
// a reset does the work again. It applies to a finished instance too,
// which runs again; a paused one stays paused, at the step. Op says who
// asked; the instance_reset entry records it with the step and the
// status the instance had. A step the definition's top-level list does
// not have is recorded as ignored.
type Reset struct {
	Step string
	Vars map[string]any
	Op   weft.Operation
}

// Recover tells the runner that no attempt of this instance is in flight
// any more: the state was loaded by a new execution (after a crash, a
// restart, or another node's lease expired). Every activity the state shows
// in flight is rescheduled as its next attempt, with the details its last
// failed attempt reported — or, when Heartbeats holds details for the
// abandoned attempt's token, with those, which are newer; the old attempts'
// tokens are refused from then on.
type Recover struct {
	// Heartbeats maps an attempt's token to the last details its guest
	// reported before it was lost (the heartbeat scheduler persisted them
	// with its lease renewals).
	Heartbeats map[string]json.RawMessage
}

// ActivityDeferred says that the shell did not start the attempt of the
// Invoke with Token, for a step limit (Reason: DeferredConcurrency or
// DeferredRateLimit): the runner waits until Until, durably, and then
// invokes the same attempt again (Invoke.Resumed). Key is the limit's key,
// for the record.
type ActivityDeferred struct {
	Token  string
	Until  time.Time
	Reason string
	Key    string
}

func (Start) input()             {}
func (ActivityCompleted) input() {}
func (ActivityFailed) input()    {}
func (TimerFired) input()        {}
func (StimulusDelivered) input() {}
func (ChildCompleted) input()    {}
func (ChildFailed) input()       {}
func (Cancel) input()            {}
func (Retry) input()             {}
func (Recover) input()           {}
func (Pause) input()             {}
func (Resume) input()            {}
func (Reset) input()             {}
func (ActivityDeferred) input()  {}

// Action is an output of Apply, for the shell to perform in order.
type Action interface{ action() }

// Invoke runs an activity attempt; its result comes back as
// ActivityCompleted or ActivityFailed with the same Token.
type Invoke struct {
	Token    string
	StepID   string
	Path     string
	Plugin   string
	Activity string
	Input    any
	// InputJSON is Input encoded, as the attempt's record keeps it: the
	// shell sends these bytes, so that the history shows what the attempt
	// got. Nil when Context.AttemptDataLimit is 0, or Input does not
	// encode (the shell's own encoding then fails the attempt).
	InputJSON json.RawMessage
	Attempt   int
	// IdempotencyKey is the same for every attempt of the step execution.
	IdempotencyKey string
	// Timeout is the step's start-to-close timeout, zero when unset;
	// Deadline is when the step's schedule-to-close ends, zero when unset.
	// The attempt must stop at whichever comes first.
	Timeout          time.Duration
	Deadline         time.Time
	HeartbeatTimeout time.Duration
	LastHeartbeat    json.RawMessage
	// Slot is the step's concurrency limit, nil without one; Rate its rate
	// limit, nil without one. The shell starts the attempt only within
	// them, and otherwise defers it (ActivityDeferred).
	Slot *StepSlot
	Rate *StepRate
	// Resumed is why this attempt was deferred before ("" if it was not):
	// after DeferredRateLimit its start was reserved already.
	Resumed string
}

// StepSlot is an attempt's place under its step's concurrency limit.
type StepSlot struct {
	// Key is the limit's key as the step names it.
	Key   string
	Limit int
	// Holder names the attempt among the key's holders and waiters: the
	// step's execution, the attempt's number and the instance
	// ("e7/2/<instance id>", see HolderInstance), so that a deferred
	// attempt invoked again is the same holder, and the next attempt is
	// another.
	Holder string
}

// StepRate is an attempt's rate limit.
type StepRate struct {
	Key   string
	Limit ratelimit.Limit
}

// ReleaseSlot gives up the slot of a step's concurrency key that an
// attempt holds or waits for, when the runner abandons the attempt without
// its end (it was deferred and the step is cancelled; it was in flight on
// a node that died).
type ReleaseSlot struct {
	Key, Holder string
	// Limit is the step's, for the waiters the release lets in.
	Limit int
}

// CancelActivity stops an attempt in flight; its late result is refused.
type CancelActivity struct{ Token string }

// ArmTimer arms a durable timer that comes back as TimerFired.
type ArmTimer struct {
	Token string
	Due   time.Time
	Kind  TimerKind
}

// TimerKind says what a timer is for, so that what a suspended instance
// waits on can be told to a person.
type TimerKind string

// Timer kinds.
const (
	// TimerDelay ends a delay step.
	TimerDelay TimerKind = "delay"
	// TimerRetry ends a retry's backoff.
	TimerRetry TimerKind = "retry"
	// TimerWaitTimeout ends a wait step that received nothing.
	TimerWaitTimeout TimerKind = "wait_timeout"
	// TimerDeferred starts a deferred attempt again.
	TimerDeferred TimerKind = "deferred"
)

// CancelTimer disarms a timer.
type CancelTimer struct{ Token string }

// CreateBookmark waits for a stimulus with Event and Key; it comes back as
// StimulusDelivered.
type CreateBookmark struct {
	Token  string
	StepID string
	Path   string
	Event  string
	Key    string
}

// RemoveBookmark removes a bookmark.
type RemoveBookmark struct{ Token string }

// StartChild starts a child instance; its end comes back as ChildCompleted
// or ChildFailed.
type StartChild struct {
	Token    string
	StepID   string
	Workflow string
	Input    any
}

// CancelChild cancels a child instance.
type CancelChild struct{ Token string }

// Persist asks for the state to be persisted now (the persistence strategy
// says so).
type Persist struct{}

// Record appends an entry to the instance's history.
type Record struct {
	Type weft.HistoryType
	Path string
	// Step is the id of the step, for step_started, step_completed and
	// step_failed (their data's "step" too), so that the shell need not
	// read it back out of Data.
	Step    string
	Attempt int
	// Actor is who asked for what the record says, on the records of an
	// operator's action (a Cancel's, a Retry's: their Op.Actor), empty on
	// the others; the shell writes it as the entry's Actor.
	Actor string
	Data  map[string]any
	// Elapsed is, for step_completed and step_failed, how long the step
	// took since it started (zero when the state predates Run.Started).
	Elapsed time.Duration
}

// Finish ends the instance.
type Finish struct {
	Status weft.Status
	Output any
	Error  *weft.Failure
}

func (Invoke) action()         {}
func (CancelActivity) action() {}
func (ArmTimer) action()       {}
func (CancelTimer) action()    {}
func (CreateBookmark) action() {}
func (RemoveBookmark) action() {}
func (StartChild) action()     {}
func (CancelChild) action()    {}
func (Persist) action()        {}
func (Record) action()         {}
func (Finish) action()         {}
func (ReleaseSlot) action()    {}
