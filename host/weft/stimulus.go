package weft

import (
	"encoding/json"
	"time"
)

// StimulusState is where a stimulus is in the queue.
type StimulusState string

// The states of a stimulus.
const (
	// StimulusQueued: waiting for a bookmark; PendingStimuli returns it.
	StimulusQueued StimulusState = "queued"
	// StimulusDelivered: consumed by a Commit (Commit.DeliveredStimulus);
	// remembered for idempotency.
	StimulusDelivered StimulusState = "delivered"
	// StimulusDead: expired while queued; listed by DeadLetters.
	StimulusDead StimulusState = "dead"
)

// Stimulus is an event sent to the host (POST /v1/events), queued
// when it arrives before the bookmark it is for.
type Stimulus struct {
	// ID makes the stimulus idempotent: a second EnqueueStimulus with the
	// same ID returns the first one's record instead of enqueuing.
	ID   string `json:"id"`
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
	// Payload is a JSON value (nil when absent).
	Payload json.RawMessage `json:"payload,omitempty"`
	// CreatedAt is set by the store when the stimulus is enqueued.
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt ends the stimulus's time in the queue (its TTL); required.
	ExpiresAt time.Time `json:"expires_at"`
	// State, SettledAt (when it was delivered or dead-lettered),
	// DeliveredTo (the consuming instance) and Outcome are set by the
	// store.
	State       StimulusState   `json:"state"`
	SettledAt   time.Time       `json:"settled_at,omitzero"`
	DeliveredTo string          `json:"delivered_to,omitempty"`
	Outcome     json.RawMessage `json:"outcome,omitempty"`
}
