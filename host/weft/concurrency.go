package weft

import "time"

// Concurrency is an instance's place under its workflow's concurrency
// limit (docs/flow-control.md): the key it counts against, decided when
// the instance is created from its input, and whether it waits for a
// slot.
type Concurrency struct {
	// Key is the value of the workflow's concurrency.key for the
	// instance's input; "" when the limit is workflow-wide.
	Key string `json:"key"`
	// WaitingSince is when the instance joined its key's line; zero when
	// it does not wait for a slot (it holds one, or has not asked yet).
	WaitingSince time.Time `json:"waiting_since,omitzero"`
}

// ConcurrencyKey is one key of a workflow's concurrency limit as the host
// shows it: who holds its slots, and how many instances wait for one.
type ConcurrencyKey struct {
	// Workflow is the workflow whose limit it is; Key the value of its
	// concurrency.key ("" for a workflow-wide limit).
	Workflow string `json:"workflow"`
	Key      string `json:"key"`
	// Step is set for a key of activity steps' concurrency limits
	// (docs/flow-control.md, "Step limits"), which steps of any workflow
	// share: Workflow is then empty, Key the steps' key, and each holder an
	// attempt of its Instance.
	Step bool `json:"step,omitempty"`
	// Limit and Policy are those in force: the definition's, as of the
	// key's last acquisition or release.
	Limit  int    `json:"limit"`
	Policy string `json:"policy"`
	// Running counts the holders (those being cancelled included: they
	// keep their slot until they end), Cancelling those being cancelled.
	Running    int `json:"running"`
	Cancelling int `json:"cancelling"`
	// Waiting is the length of the key's line, OldestWait when its first
	// instance joined it (zero when none waits).
	Waiting    int       `json:"waiting"`
	OldestWait time.Time `json:"oldest_wait,omitzero"`
	// Holders are the instances that hold a slot, in the order they got
	// it.
	Holders []SlotHolder `json:"holders"`
}

// SlotHolder is an instance that holds a slot of a concurrency key.
type SlotHolder struct {
	Instance string `json:"instance"`
	// Since is when it got the slot.
	Since time.Time `json:"since"`
	// Cancelling is set when a newer instance's cancel_oldest policy is
	// cancelling it.
	Cancelling bool `json:"cancelling,omitempty"`
}

// SlotWaiter is an instance in the line of a concurrency key.
type SlotWaiter struct {
	Instance string `json:"instance"`
	// Since is when it joined the line.
	Since time.Time `json:"since"`
}
