package weft

import "time"

// Operation is who asked for an action on an instance (a cancel, a retry,
// an import, a delete), why, and when: the audit of operator actions
// (docs/operations.md, "Audit"). It travels with the action — in the inbox
// message that carries it (Message.Op) to the execution that applies it —
// so that the history entry recording the action says who asked
// (HistoryEntry.Actor) and its data why and when (reason, batch,
// requested_at: see Data).
type Operation struct {
	// Actor is who asked: the name of the API token the request carried
	// (api.Token.Name), ActorAnonymous on a host without tokens,
	// ActorEngine for the host's own actions and ActorScheduler for a
	// schedule's. Empty in a message written before actors were recorded.
	Actor string `json:"actor,omitempty"`
	// Reason is why, as the actor said it.
	Reason string `json:"reason,omitempty"`
	// Batch is the id of the batch job the action is one item of, empty
	// for an action on one instance. Batch jobs set it (issue 36's batch
	// operations, not built yet); nothing else does.
	Batch string `json:"batch,omitempty"`
	// At is when the action was asked for. The history entry's own time
	// is when it was applied, which may be later: a busy instance applies
	// a message when it next runs.
	At time.Time `json:"at,omitzero"`
}

// The actors that are not an API token.
const (
	// ActorAnonymous asked through the API of a host without tokens, where
	// a request names no one.
	ActorAnonymous = "anonymous"
	// ActorEngine is the host itself: a concurrency policy's cancel
	// (cancel_newest, cancel_oldest), a parent's end cancelling its
	// children, retention.
	ActorEngine = "engine"
	// ActorScheduler is the schedules sweep: a fire that cancels the run
	// it replaces (overlap cancel_other).
	ActorScheduler = "scheduler"
)

// Data adds what o says of its action to data, the data of the history
// entry that records it, and returns data (a new map when data is nil):
// "reason", "batch" and "requested_at" (o.At), each only when set. The
// actor is not data: it is the entry's Actor.
func (o Operation) Data(data map[string]any) map[string]any {
	if data == nil {
		data = map[string]any{}
	}
	if o.Reason != "" {
		data["reason"] = o.Reason
	}
	if o.Batch != "" {
		data["batch"] = o.Batch
	}
	if !o.At.IsZero() {
		data["requested_at"] = o.At
	}
	return data
}

// Pause is an instance's pause: since when, and the operator's action
// that paused it (who, why). The runner keeps it in the instance's state
// while the instance is paused (docs/operations.md, "Pause and resume").
type Pause struct {
	Since time.Time `json:"since"`
	Op    Operation `json:"op"`
}

// ResetPoint is a top-level step an instance began, to which it can be
// reset (docs/operations.md, "Reset"): its last beginning, and whether
// the variables it began with were recorded.
type ResetPoint struct {
	// Step is the step's id; Index its place in the definition's steps.
	Step  string `json:"step"`
	Index int    `json:"index"`
	// Seq and Time are those of the step's last step_started entry.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Vars says whether the variables are recorded; Reason why not when
	// they are not (larger than history.vars_limit, or the step began
	// before the host recorded them).
	Vars   bool   `json:"vars"`
	Reason string `json:"reason,omitempty"`
}
