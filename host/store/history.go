package store

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

	HistoryStepStarted   HistoryType = "step_started"
	HistoryStepCompleted HistoryType = "step_completed"
	HistoryStepFailed    HistoryType = "step_failed"
	HistoryBranchTaken   HistoryType = "branch_taken"

	HistoryActivityScheduled HistoryType = "activity_scheduled"
	HistoryActivityCompleted HistoryType = "activity_completed"
	HistoryActivityFailed    HistoryType = "activity_failed"
	HistoryRetryScheduled    HistoryType = "retry_scheduled"
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
