package weft

import "time"

// HistoryType says what a HistoryEntry records. The runner and the engine
// write these; the API and the CLI show them as they are.
type HistoryType string

// The history's entry types (docs/http-api.md, "History").
const (
	HistoryInstanceCreated   HistoryType = "instance_created"
	HistoryInstanceImported  HistoryType = "instance_imported"
	HistoryInstanceStarted   HistoryType = "instance_started"
	HistoryInstanceCompleted HistoryType = "instance_completed"
	HistoryInstanceFailed    HistoryType = "instance_failed"
	HistoryInstanceCancelled HistoryType = "instance_cancelled"
	// HistoryInstanceRetried: a failed instance was set to continue from
	// the steps its failure stopped.
	HistoryInstanceRetried HistoryType = "instance_retried"
	// HistoryInstancePaused: an operator paused the instance; it begins
	// no step until resumed (data: reason, batch, requested_at; the
	// entry's actor).
	HistoryInstancePaused HistoryType = "instance_paused"
	// HistoryInstanceResumed: an operator resumed a paused instance
	// (data: as instance_paused's, and held: how many inputs it applies
	// now).
	HistoryInstanceResumed HistoryType = "instance_resumed"
	// HistoryEventHeld: a timer's fire, a stimulus or a child's end for
	// a paused instance, kept to be applied when it is resumed (data:
	// event, token).
	HistoryEventHeld HistoryType = "event_held"
	// HistoryInstanceReset: an operator ran the instance again from a
	// top-level step, with the variables it had when that step began
	// (data: step, from_status, reason, batch, requested_at; the entry's
	// actor).
	HistoryInstanceReset HistoryType = "instance_reset"
	// HistoryInstanceMigrated: the instance moved to another version of
	// its workflow or of its plugins (data: from_version, to_version,
	// plugins: name → {from, to}, notes, reason, batch, requested_at; the
	// entry's actor).
	HistoryInstanceMigrated HistoryType = "instance_migrated"
	// HistoryMigrationRefused: a migration found, when it came to apply,
	// that the instance could no longer move; nothing changed (data:
	// from_version, to_version, problems, and the operation's).
	HistoryMigrationRefused HistoryType = "migration_refused"
	// HistoryStartHeld: the instance was created while its workflow was
	// paused; it is held, pending, until the workflow is resumed (data:
	// the pause's reason; the entry's actor is who paused the workflow).
	HistoryStartHeld HistoryType = "start_held"
	// HistoryStartReleased: a held instance's workflow was resumed; it
	// starts (data: held_ms).
	HistoryStartReleased HistoryType = "start_released"
	// HistorySlotWaiting: every slot of the instance's concurrency key was
	// taken; it waits in the key's line (data: key, limit).
	HistorySlotWaiting HistoryType = "slot_waiting"
	// HistorySlotAcquired: an instance that waited got its slot (data:
	// key, limit, waited_ms).
	HistorySlotAcquired HistoryType = "slot_acquired"

	HistoryStepStarted   HistoryType = "step_started"
	HistoryStepCompleted HistoryType = "step_completed"
	HistoryStepFailed    HistoryType = "step_failed"
	HistoryBranchTaken   HistoryType = "branch_taken"

	HistoryActivityScheduled HistoryType = "activity_scheduled"
	HistoryActivityCompleted HistoryType = "activity_completed"
	HistoryActivityFailed    HistoryType = "activity_failed"
	HistoryRetryScheduled    HistoryType = "retry_scheduled"
	// HistoryActivityDeferred: an attempt did not start, for the step's
	// concurrency or rate limit; it starts when its turn comes (data:
	// reason, key, until).
	HistoryActivityDeferred HistoryType = "activity_deferred"
	// HistoryAttemptAbandoned: an attempt in flight when its node died,
	// given up by the run that took the instance over.
	HistoryAttemptAbandoned HistoryType = "attempt_abandoned"
	// HistoryLateCompletionRefused: an attempt's end that arrived after
	// the instance stopped waiting for it (another node took it over).
	HistoryLateCompletionRefused HistoryType = "late_completion_refused"

	HistoryTimerArmed   HistoryType = "timer_armed"
	HistoryTimerFired   HistoryType = "timer_fired"
	HistoryWaitTimedOut HistoryType = "wait_timed_out"

	HistoryBookmarkCreated HistoryType = "bookmark_created"
	HistoryBookmarkResumed HistoryType = "bookmark_resumed"

	HistoryChildStarted   HistoryType = "child_started"
	HistoryChildCompleted HistoryType = "child_completed"

	// HistoryEventRefused: an input for something the instance no longer
	// waits for (a superseded attempt, a cancelled timer), refused.
	HistoryEventRefused HistoryType = "event_refused"
	// HistoryEventIgnored: an input that arrived after the instance
	// finished.
	HistoryEventIgnored HistoryType = "event_ignored"
)

// LogLine is one line an activity attempt's guest logged (through the log
// host function, stdout or stderr), or a note the host added to them. The
// engine keeps an attempt's lines in the data of the history entry that
// ends it (see AttemptLogs).
type LogLine struct {
	Time time.Time `json:"time"`
	// Level is debug, info, warn or error.
	Level string `json:"level"`
	// Source is log, stdout or stderr for what the guest wrote, http for
	// the host's notes on its requests.
	Source  string `json:"source"`
	Message string `json:"message"`
}

// LogsDropped is what the plugin runtime's per-call log limits kept out of
// an attempt's log lines.
type LogsDropped struct {
	Records int `json:"records"`
	Bytes   int `json:"bytes"`
	// Limit is the limit that was reached: LogLimitRecords or
	// LogLimitBytes.
	Limit string `json:"limit"`
}

// The log limits LogsDropped.Limit names (plugins.max_log_records and
// plugins.max_log_bytes).
const (
	LogLimitRecords = "records"
	LogLimitBytes   = "bytes"
)

// AttemptLogs is an attempt's log lines as the data of its
// activity_completed, activity_failed or late_completion_refused history
// entry holds them: data.logs and data.logs_dropped. The API's logs
// endpoint reads them back with this type.
type AttemptLogs struct {
	Lines   []LogLine    `json:"logs,omitempty"`
	Dropped *LogsDropped `json:"logs_dropped,omitempty"`
}

// LogEntry is one log line of an instance's attempts as
// GET /v1/instances/{id}/logs answers it: the line, and the history entry
// it was recorded in (its seq, step path, attempt and node).
type LogEntry struct {
	Seq      uint64 `json:"seq"`
	StepPath string `json:"step_path"`
	Attempt  int    `json:"attempt"`
	Node     string `json:"node"`
	LogLine
}
