package apiv1

import (
	"encoding/json"
	"time"
)

// HistoryEntry is one entry of an instance's history
// (GET /v1/instances/{id}/history).
type HistoryEntry struct {
	// Seq numbers the entries of an instance: 1, 2, 3…
	Seq  uint64      `json:"seq"`
	Time time.Time   `json:"time"`
	Type HistoryType `json:"type"`
	// StepPath, Attempt and Node are set on the entries of a step's
	// attempts.
	StepPath string `json:"step_path,omitempty"`
	Attempt  int    `json:"attempt,omitempty"`
	Node     string `json:"node,omitempty"`
	// Actor is who asked for what the entry records, on the entries of an
	// operator's action (instance_cancelled, instance_retried,
	// instance_imported, and the event_ignored of a cancel or a retry
	// that came too late): the name of the API token, "anonymous" on a
	// host without tokens, "engine" for the host's own actions,
	// "scheduler" for a schedule's. Empty on the other entries. Their
	// data holds the reason (docs/operations.md, "Audit").
	Actor string `json:"actor,omitempty"`
	// Data is the entry's own JSON document, which depends on its type
	// (docs/http-api.md, "History").
	Data json.RawMessage `json:"data,omitempty"`
}

// HistoryType says what a history entry records: instance_created,
// step_started, activity_failed… (docs/http-api.md, "History"). The set is
// open — a host may add types, and a client shows an entry of a type it
// does not know as it is — so the package declares no constants for it;
// openapi.json enumerates the types this version writes, which are the
// host's own (host/weft), as TestOpenAPI checks.
type HistoryType string

// LogEntry is one log line of an instance's activity attempts
// (GET /v1/instances/{id}/logs): the line, and the history entry that
// keeps it (its seq, step path, attempt and node).
type LogEntry struct {
	Seq      uint64 `json:"seq"`
	StepPath string `json:"step_path"`
	Attempt  int    `json:"attempt"`
	// Node is the node that ran the attempt.
	Node string `json:"node"`
	// Time is when the host received the line.
	Time  time.Time `json:"time"`
	Level LogLevel  `json:"level"`
	// Source is log, stdout or stderr for what the guest wrote, http for
	// the host's notes on its requests.
	Source  string `json:"source"`
	Message string `json:"message"`
}

// LogLevel is a log line's level.
type LogLevel string

// The levels of a log line.
const (
	LevelDebug LogLevel = "debug"
	LevelInfo  LogLevel = "info"
	LevelWarn  LogLevel = "warn"
	LevelError LogLevel = "error"
)
