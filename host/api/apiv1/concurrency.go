package apiv1

import "time"

// ConcurrencyKey is one key of a workflow's concurrency limit as the API
// shows it (docs/flow-control.md): the instances that hold its slots, and
// how many wait for one. GET /v1/concurrency lists the keys that have
// running or waiting instances; a key nobody holds or waits for is not
// kept.
type ConcurrencyKey struct {
	// Workflow is the workflow whose limit it is; Key the value of its
	// concurrency.key for the instances that count against it ("" for a
	// workflow-wide limit).
	Workflow string `json:"workflow"`
	Key      string `json:"key"`
	// Step is set for a key of activity steps' concurrency limits, which
	// steps of any workflow share: Workflow is then empty, and each holder
	// is an attempt of its instance (docs/flow-control.md, "Step limits").
	Step bool `json:"step,omitempty"`
	// Limit and Policy are those in force: the definition's, as of the
	// key's last acquisition or release.
	Limit  int               `json:"limit"`
	Policy ConcurrencyPolicy `json:"policy"`
	// Running counts the holders, those being cancelled included (they
	// keep their slot until they end); Cancelling counts those.
	Running    int `json:"running"`
	Cancelling int `json:"cancelling"`
	// Waiting is the length of the key's line, OldestWait when its first
	// instance joined it; absent when none waits.
	Waiting    int       `json:"waiting"`
	OldestWait time.Time `json:"oldest_wait,omitzero"`
	// Holders are the instances that hold a slot, in the order they got
	// it; never null.
	Holders []SlotHolder `json:"holders"`
}

// ConcurrencyPolicy says what a workflow's concurrency limit does with an
// instance that finds every slot of its key taken.
type ConcurrencyPolicy string

// The policies of a concurrency limit.
const (
	// PolicyQueue: the instance waits in the key's line, first come,
	// first served. The default.
	PolicyQueue ConcurrencyPolicy = "queue"
	// PolicyCancelNewest: the instance is cancelled; the holders go on.
	PolicyCancelNewest ConcurrencyPolicy = "cancel_newest"
	// PolicyCancelOldest: the instance waits in the line, and the oldest
	// instances of the key beyond the newest limit are cancelled (waiters
	// leave the line at once; holders keep their slot until they end):
	// for work where only the latest matters.
	PolicyCancelOldest ConcurrencyPolicy = "cancel_oldest"
)

// SlotHolder is an instance that holds a slot of a concurrency key.
type SlotHolder struct {
	InstanceID string `json:"instance_id"`
	// Since is when it got the slot.
	Since time.Time `json:"since"`
	// Cancelling is set when a newer instance's cancel_oldest policy is
	// cancelling it.
	Cancelling bool `json:"cancelling,omitempty"`
}

// SlotWaiter is an instance in the line of a concurrency key.
type SlotWaiter struct {
	InstanceID string `json:"instance_id"`
	// Since is when it joined the line.
	Since time.Time `json:"since"`
}

// ConcurrencyLine is GET /v1/concurrency/{workflow}'s answer: one key,
// and a page of its line, first in line first. NextCursor, passed as
// ?cursor=, selects the line's next page; it is empty after the last.
type ConcurrencyLine struct {
	Key ConcurrencyKey `json:"key"`
	// Waiting is never null.
	Waiting    []SlotWaiter `json:"waiting"`
	NextCursor string       `json:"next_cursor"`
}

// Concurrency is an instance's place under its workflow's concurrency
// limit: the key it counts against, decided when it is created, and since
// when it waits for a slot.
type Concurrency struct {
	Key string `json:"key"`
	// WaitingSince is when it joined its key's line; absent when it does
	// not wait (it holds a slot, has not asked for one yet, or ended).
	WaitingSince time.Time `json:"waiting_since,omitzero"`
}
