package apiv1

import (
	"encoding/json"
	"time"
)

// Schedule is a schedule as the API shows it (docs/schedules.md): its
// document, and what its record says of it now — its pause, its next
// fires, its runs and what waits to be taken.
type Schedule struct {
	ID string `json:"id"`
	// Workflow is the workflow each fire starts (the document's).
	Workflow string `json:"workflow"`
	// Document is the schedule's document in its canonical JSON form
	// (id, workflow, input, spec, policy; durations as 1m30s), as it was
	// saved: what a client shows or edits, without a YAML parser.
	Document json.RawMessage `json:"document"`
	// Paused stops the scheduled fires; Note says why (the operator's
	// note, or the run whose failure paused it).
	Paused bool   `json:"paused"`
	Note   string `json:"note,omitempty"`
	// NextFires are the next nominal fire times, up to 10, in UTC; none
	// while it is paused, past its end or at its run limit.
	NextFires []time.Time `json:"next_fires"`
	// Running lists the runs going on when the schedules sweep last
	// looked; Recent the last ones that ended, newest first.
	Running []ScheduleRun `json:"running"`
	Recent  []ScheduleRun `json:"recent"`
	// Runs counts the scheduled runs started (what policy.max_runs
	// limits).
	Runs int `json:"runs"`
	// Waiting counts the fires waiting for a run to end (buffered);
	// Triggers and Backfills the operators' requests not yet taken.
	Waiting   int `json:"waiting"`
	Triggers  int `json:"triggers"`
	Backfills int `json:"backfills"`
	// Revision is 1 when the schedule is created and one more at every
	// change, an operator's or the sweep's.
	Revision uint64 `json:"revision"`
	// Wake is when the schedules sweep looks at the schedule next; absent
	// when nothing is due until an operator acts.
	Wake      time.Time `json:"wake,omitzero"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// ScheduleRun is a run a schedule started: the instance
// <schedule id>@<nominal time in UTC>.
type ScheduleRun struct {
	InstanceID string `json:"instance_id"`
	// Nominal is the time of the fire that started it.
	Nominal time.Time `json:"nominal"`
	Kind    FireKind  `json:"kind"`
	// Status is the instance's when the schedules sweep last looked.
	Status    Status    `json:"status"`
	StartedAt time.Time `json:"started_at"`
	// EndedAt is when the sweep saw the run end; absent while it runs.
	EndedAt time.Time `json:"ended_at,omitzero"`
	// Gone is set when the instance was deleted before the sweep saw it
	// end.
	Gone bool `json:"gone,omitempty"`
}

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

// ScheduleEvent is one entry of a schedule's record
// (GET /v1/schedules/{id}/events): a change an operator made, a run
// started or ended, fires skipped, a fire that could not start.
type ScheduleEvent struct {
	// Seq numbers a schedule's events from 1.
	Seq  uint64            `json:"seq"`
	Time time.Time         `json:"time"`
	Type ScheduleEventType `json:"type"`
	// Actor is who made it: an API token's name (anonymous on a host
	// without tokens), the schedules_file, or scheduler for the sweep's
	// own.
	Actor string `json:"actor"`
	// Data says more, by type (docs/schedules.md, "The record").
	Data json.RawMessage `json:"data,omitempty"`
}

// ScheduleEventType says what a schedule's event records: created,
// paused, run_started, skipped… (docs/schedules.md, "The record"). As
// with HistoryType, the set is open, so the package declares no
// constants for it; openapi.json enumerates the types this version
// writes, which are the host's own (host/weft).
type ScheduleEventType string

// PauseRequest is the optional body of POST /v1/schedules/{id}/pause and
// /unpause.
type PauseRequest struct {
	// Note says why, for the schedule's note and its record.
	Note string `json:"note,omitempty"`
}

// TriggerRequest is the optional body of POST /v1/schedules/{id}/trigger.
type TriggerRequest struct {
	// Overlap is the overlap policy of this run (skip, buffer_one,
	// buffer_all, cancel_other, allow_all); empty: the schedule's.
	Overlap string `json:"overlap,omitempty"`
}

// BackfillRequest is the body of POST /v1/schedules/{id}/backfill: the
// runs of the times the schedule's calendar names from From to To, both
// included, in the past.
type BackfillRequest struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Overlap is the overlap policy of the backfill's runs; empty: the
	// schedule's.
	Overlap string `json:"overlap,omitempty"`
}

// BackfillResult is the answer of a backfill: how many fires the range
// holds, and the schedule with the backfill waiting to be taken.
type BackfillResult struct {
	Fires    int      `json:"fires"`
	Schedule Schedule `json:"schedule"`
}
