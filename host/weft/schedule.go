package weft

import (
	"encoding/json"
	"time"
)

// Schedule is a schedule as the store keeps it: its document, which says
// when it fires and what it starts, and the scheduler's state. The store
// looks inside neither (internal/schedule reads them).
type Schedule struct {
	// ID names the schedule, with the rules of a workflow's name.
	ID string `json:"id"`
	// Document is the schedule's canonical JSON document: its workflow,
	// input, spec and policy.
	Document json.RawMessage `json:"document"`
	// State is the scheduler's state (its cursor, runs, buffer, pause).
	State json.RawMessage `json:"state"`
	// Note is what the operator said when they last paused or unpaused
	// it, or why it paused itself.
	Note string `json:"note,omitempty"`
	// Wake is when the scheduler must look at the schedule next; zero when
	// nothing is due until an operator acts (paused, or past its end).
	Wake time.Time `json:"wake,omitzero"`
	// Revision is 1 when the schedule is created and +1 at every write; a
	// write names the revision it read and is refused if another write
	// came first.
	Revision uint64 `json:"revision"`
	// CreatedAt and UpdatedAt are set by the store.
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ScheduleEvent is one entry of a schedule's record: a change an operator
// made, and who made it; a run it started or saw end; fires it skipped; a
// fire that could not start.
type ScheduleEvent struct {
	// Seq orders a schedule's events from 1; set by the store.
	Seq uint64 `json:"seq"`
	// Time is set by the store.
	Time time.Time         `json:"time"`
	Type ScheduleEventType `json:"type"`
	// Actor is who made a change: the name of the API token, the
	// schedules_file, or "scheduler" for the scheduler's own records.
	Actor string `json:"actor"`
	// Data says more, by type (docs/schedules.md).
	Data json.RawMessage `json:"data,omitempty"`
}

// ScheduleEventType says what a ScheduleEvent records.
type ScheduleEventType string

// The types of ScheduleEvent.
const (
	ScheduleCreated   ScheduleEventType = "created"
	ScheduleUpdated   ScheduleEventType = "updated"
	SchedulePaused    ScheduleEventType = "paused"
	ScheduleUnpaused  ScheduleEventType = "unpaused"
	ScheduleTriggered ScheduleEventType = "triggered"
	// ScheduleBackfill: an operator asked for the runs of a past range.
	ScheduleBackfill ScheduleEventType = "backfill"
	// ScheduleRunStarted: a fire started a run (an instance).
	ScheduleRunStarted ScheduleEventType = "run_started"
	// ScheduleRunEnded: the scheduler saw a run end.
	ScheduleRunEnded ScheduleEventType = "run_ended"
	// ScheduleRunCancelled: the overlap policy cancelled a run.
	ScheduleRunCancelled ScheduleEventType = "run_cancelled"
	// ScheduleSkipped: fires that started nothing, and why.
	ScheduleSkipped ScheduleEventType = "skipped"
	// ScheduleStartFailed: a fire could not start its run (its workflow
	// is gone, its input did not evaluate); the fire is not retried.
	ScheduleStartFailed ScheduleEventType = "start_failed"
)

// MaxScheduleEvents is how many events the store keeps of each schedule:
// the oldest go first.
const MaxScheduleEvents = 1000

// ScheduleError lists every problem of a schedule document or of an
// operation on a schedule, each with its path. It matches ErrInvalid.
type ScheduleError struct {
	// ID is the schedule's id when it could be read, else empty.
	ID       string
	Problems []Problem
}

// Error implements error.
func (e *ScheduleError) Error() string { return problemsError("invalid schedule", e.ID, e.Problems) }

// Is reports whether target is ErrInvalid.
func (e *ScheduleError) Is(target error) bool { return target == ErrInvalid }

// FireKind says where a schedule's fire came from.
type FireKind string

// The kinds of fire.
const (
	// FireScheduled: the schedule's calendar named the time.
	FireScheduled FireKind = "scheduled"
	// FireTrigger: an operator asked for a run now.
	FireTrigger FireKind = "trigger"
	// FireBackfill: an operator asked for the runs of a past range.
	FireBackfill FireKind = "backfill"
)

// ScheduleRun is a run a schedule started: an instance of its workflow.
type ScheduleRun struct {
	InstanceID string `json:"instance_id"`
	// Nominal is the time of the fire that started it.
	Nominal   time.Time `json:"nominal"`
	Kind      FireKind  `json:"kind"`
	StartedAt time.Time `json:"started_at"`
	// Status is the instance's status when the scheduler last looked.
	Status Status `json:"status"`
	// Gone is set when the instance was deleted before the scheduler saw
	// it end.
	Gone bool `json:"gone,omitempty"`
	// EndedAt is when the scheduler saw the run ended; zero while it runs.
	EndedAt time.Time `json:"ended_at,omitzero"`
	// CancelRequested is set once the scheduler asked for the run's
	// cancellation (overlap cancel_other), so that it asks once.
	CancelRequested bool `json:"cancel_requested,omitempty"`
}

// ScheduleView is a schedule as the node shows it: its record, and what
// its state says.
type ScheduleView struct {
	Schedule
	// Paused: the scheduled fires are stopped; Note says why.
	Paused bool
	// NextFires are the next nominal fire times; none while paused or
	// past the end or the run limit.
	NextFires []time.Time
	// Running lists the runs going on when the scheduler last looked, each
	// with its status as it is now; Recent the last ones the scheduler saw
	// end, newest first.
	Running, Recent []ScheduleRun
	// Runs counts the scheduled runs started.
	Runs int
	// Waiting counts the fires waiting for a run to end (buffered), the
	// triggers and the backfills not yet taken.
	Waiting, Triggers, Backfills int
}
