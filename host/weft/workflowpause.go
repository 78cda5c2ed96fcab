package weft

import "time"

// WorkflowPause is a workflow paused by an operator: its new instances are
// created and held, pending, until it is resumed (docs/operations.md,
// "Pause a workflow"). The store keeps one per paused workflow, and every
// start reads it with the workflow's definition (store.StartCatalog), so
// that a start either sees the pause or is refused and reads again.
type WorkflowPause struct {
	// Workflow is the paused workflow's name. It need not have a
	// definition: a workflow may be paused before it is deployed.
	Workflow string `json:"workflow"`
	// Since is when the workflow was paused, set by the store.
	Since time.Time `json:"since"`
	// Op is who paused it and why. A pause of a paused workflow keeps the
	// first one's.
	Op Operation `json:"op"`
}

// Hold marks a pending instance held: created while its workflow was
// paused, it is not queued until released (by the resume of its workflow,
// or by recovery when it finds the workflow no longer paused).
type Hold struct {
	// Since is when the instance was held: its creation.
	Since time.Time `json:"since"`
}
