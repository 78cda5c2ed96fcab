package weft

import (
	"encoding/json"
	"time"
)

// Bookmark is a suspended step waiting for a stimulus with Event as its
// name and Key as its correlation key.
type Bookmark struct {
	InstanceID string `json:"instance_id"`
	StepPath   string `json:"step_path"`
	Event      string `json:"event"`
	Key        string `json:"key"`
	// Token is the runner's name for the wait; a Message for this bookmark
	// carries it. Optional for the store.
	Token string `json:"token,omitempty"`
	// Order is the instance's, for queueing it when an event comes.
	Order Order `json:"order,omitzero"`
}

// Timer is a durable timer of an instance (a delay step, a wait's timeout,
// a retry's backoff…). It is removed only by a Commit of its instance that
// replaces the timer set, or with the instance.
type Timer struct {
	InstanceID string `json:"instance_id"`
	// ID is unique within the instance.
	ID   string          `json:"id"`
	Due  time.Time       `json:"due"`
	Kind string          `json:"kind,omitempty"`
	Data json.RawMessage `json:"data,omitempty"`
	// Order is the instance's, for queueing it when the timer is due.
	Order Order `json:"order,omitzero"`
}
