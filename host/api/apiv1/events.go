package apiv1

import (
	"encoding/json"
	"time"
)

// EventRequest is the body of POST /v1/events: a stimulus.
type EventRequest struct {
	Name string `json:"name"`
	// Key is the correlation key that a waiting instance's bookmark names.
	Key string `json:"key,omitempty"`
	// Payload is a JSON document; nil is null.
	Payload json.RawMessage `json:"payload,omitempty"`
	// ID makes the event idempotent; empty lets the host choose one.
	ID string `json:"id,omitempty"`
	// Priority, when not 0, is the priority in the ready queue (1,
	// served first, to 5) of the instances the event's triggers start,
	// before the ones their definitions compute; 0 leaves theirs. An
	// instance the event resumes keeps its own.
	Priority int `json:"priority,omitempty"`
}

// EventOutcome is what an event did, once durable: the instances it
// resumed and started.
type EventOutcome struct {
	ID      string   `json:"id"`
	Resumed []string `json:"resumed"`
	Started []string `json:"started"`
	// Queued is true when nothing waited for the event and nothing
	// started: it waits for a bookmark until its TTL.
	Queued bool `json:"queued"`
	// Warning, with Queued, says when no workflow waits for or is
	// triggered by the event's name: a misspelt name, say.
	Warning string `json:"warning,omitempty"`
}

// Stimulus is an event the host keeps: one queued (GET
// /v1/events/queued), waiting for an instance to wait for it until
// ExpiresAt, or one dead (GET /v1/events/dead), which found none before.
type Stimulus struct {
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Key       string          `json:"key,omitempty"`
	Payload   json.RawMessage `json:"payload,omitempty"`
	CreatedAt time.Time       `json:"created_at"`
	ExpiresAt time.Time       `json:"expires_at"`
	// State is queued or dead.
	State string `json:"state"`
	// SettledAt is when a dead stimulus was dead-lettered.
	SettledAt time.Time `json:"settled_at,omitzero"`
}

// RefreshRequest is the optional body of POST /v1/admin/refresh.
type RefreshRequest struct {
	// Workflows names the definitions to reload; none reloads all.
	Workflows []string `json:"workflows,omitempty"`
}

// RefreshResult is what a refresh of the definitions from the host's
// workflows_dir did.
type RefreshResult struct {
	Status RefreshStatus   `json:"status"`
	Files  []RefreshedFile `json:"files"`
}

// RefreshStatus says whether a refresh ran.
type RefreshStatus string

// The statuses of a refresh.
const (
	RefreshDone RefreshStatus = "refreshed"
	// RefreshInProgress: another refresh of the same definitions held the
	// lock, and this one did nothing.
	RefreshInProgress RefreshStatus = "already_in_progress"
)

// RefreshedFile is one definition file of a refresh: the version it saved,
// or why it saved none.
type RefreshedFile struct {
	File    string `json:"file"`
	Name    string `json:"name,omitempty"`
	Version int    `json:"version,omitempty"`
	// Created is false when the definition had not changed.
	Created  bool         `json:"created"`
	Problems []FieldError `json:"problems,omitempty"`
	Error    string       `json:"error,omitempty"`
}
