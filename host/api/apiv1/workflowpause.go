package apiv1

import "time"

// WorkflowPause is a paused workflow (docs/operations.md, "Pause a
// workflow"): its starts are accepted and held, pending, until it is
// resumed.
type WorkflowPause struct {
	// Workflow is the paused workflow's name; it need not be saved yet.
	Workflow string `json:"workflow"`
	// Since is when it was paused.
	Since time.Time `json:"since"`
	// Actor is who paused it (an API token's name: docs/operations.md,
	// "Audit"), Reason why. A pause of a paused workflow keeps the first
	// one's.
	Actor  string `json:"actor,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Held counts the starts it holds: set when one workflow is shown
	// (GET /v1/workflows/{name}), absent elsewhere. The host reads at
	// most 10,000 of the workflow's pending instances to count them;
	// HeldMore says it stopped there, and Held is then a lower bound.
	Held     *int `json:"held,omitempty"`
	HeldMore bool `json:"held_more,omitempty"`
}

// WorkflowPauseRequest is the optional body of POST
// /v1/workflows/{name}/pause.
type WorkflowPauseRequest struct {
	// Reason is shown with the pause, and each held start's start_held
	// history entry records it; at most 1,024 bytes. Default: paused
	// through the API.
	Reason string `json:"reason,omitempty"`
}

// WorkflowResumeRequest is the optional body of POST
// /v1/workflows/{name}/resume.
type WorkflowResumeRequest struct {
	// Reason is the release batch's, at most 1,024 bytes. Default:
	// resumed through the API.
	Reason string `json:"reason,omitempty"`
	// Rate bounds the held starts released per second: nil for a batch's
	// default (1,000), 0 for no limit.
	Rate *float64 `json:"rate,omitempty"`
}

// WorkflowResume is the answer of POST /v1/workflows/{name}/resume: the
// pause it removed, and the batch job that releases the held starts,
// oldest first (op release), whose progress shows the release.
type WorkflowResume struct {
	Pause WorkflowPause `json:"pause"`
	// Release is the release batch. A batch that cannot be started
	// fails the request, and the workflow stays paused.
	Release *Batch `json:"release"`
}

// Hold marks an instance held: created while its workflow was paused, it
// is pending and does not start until the workflow is resumed.
type Hold struct {
	// Since is when it was held: its creation.
	Since time.Time `json:"since"`
}
