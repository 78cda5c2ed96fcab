package apiv1

import (
	"encoding/json"
	"time"
)

// Shadow runs (docs/replay.md, docs/http-api.md "Shadow runs"): POST
// /v1/plugins/{name}/shadow replays a plugin's recorded attempts against
// a candidate module, next to the version that recorded each, so that an
// admin sees how the candidate would have fared on that traffic before
// uploading it. These are the API's form of the host's weft.ShadowReport,
// field for field, with durations in milliseconds as ReplayReport has
// them.

// ShadowReport is what a shadow run found: each recorded attempt it
// replayed, newest first, and their sums.
type ShadowReport struct {
	// Plugin is the plugin whose attempts were replayed; CandidateVersion
	// the candidate module's hash (its sha256, as an upload's version).
	Plugin           string `json:"plugin"`
	CandidateVersion string `json:"candidate_version"`
	// Query is what selected the attempts, its limit filled in.
	Query TapeQuery `json:"query"`
	// Attempts are the replayed attempts, newest first; never null.
	Attempts []ShadowAttempt `json:"attempts"`
	// Summary sums them.
	Summary ShadowSummary `json:"summary"`
	// DurationMS is how long the shadow run took, in milliseconds.
	DurationMS int64 `json:"duration_ms"`
}

// TapeQuery is what selects the recorded attempts of a shadow run: the
// plugin's, of one workflow's instances when Workflow is set, recorded at
// or after Since when it is set, the newest Limit of them.
type TapeQuery struct {
	Plugin   string    `json:"plugin"`
	Workflow string    `json:"workflow,omitempty"`
	Since    time.Time `json:"since,omitzero"`
	Limit    int       `json:"limit"`
}

// ShadowAttempt is one recorded attempt as a shadow run replayed it: how
// the candidate compares with the recording, and how its guest work
// compares with the recorded version's on the same tape.
type ShadowAttempt struct {
	// Key names the recorded attempt; Workflow, Activity and
	// RecordedVersion say what ran, RecordedAt when it was recorded.
	Key             TapeKey   `json:"key"`
	Workflow        string    `json:"workflow,omitempty"`
	Activity        string    `json:"activity"`
	RecordedVersion string    `json:"recorded_version"`
	RecordedAt      time.Time `json:"recorded_at"`
	// Outcome is how the candidate's replay compares with the recording:
	// same, different_output, diverged, failed, truncated, ended_early,
	// or not_run (with Error) when it could not be replayed.
	Outcome string `json:"outcome"`
	// Error says why the attempt was not replayed (outcome not_run).
	Error string `json:"error,omitempty"`
	// RecordedOutput and Output are the outputs, when each completed;
	// Diff is a JSON Patch (RFC 6902) from the recorded output to the
	// candidate's, when both completed with different documents.
	RecordedOutput json.RawMessage `json:"recorded_output,omitempty"`
	Output         json.RawMessage `json:"output,omitempty"`
	Diff           json.RawMessage `json:"diff,omitempty"`
	// OutputsOmitted says that an output or the diff was larger than 16
	// KiB and is left out (a replay of the attempt shows it).
	OutputsOmitted bool `json:"outputs_omitted,omitempty"`
	// RecordedFailure and Failure say how each failed.
	RecordedFailure *ReplayFailure `json:"recorded_failure,omitempty"`
	Failure         *ReplayFailure `json:"failure,omitempty"`
	// Divergence is the first host call the candidate asked that the
	// tape does not hold (outcome diverged or truncated).
	Divergence *ReplayDivergence `json:"divergence,omitempty"`
	// Baseline is how the recorded version replayed the same tape: same,
	// unless the tape does not replay on its own version, and then the
	// candidate's outcome says less.
	Baseline string `json:"baseline"`
	// Fuel and BaselineFuel are the guest work of the candidate's and the
	// baseline's replays, in the instrumentation's fuel (about 64 bytes
	// of guest code run each; the same for every replay of one module on
	// one tape, whatever the machine's load). Speed compares them:
	// slower, faster or alike (docs/replay.md says by how much); absent
	// when either did not run.
	Fuel         uint64 `json:"fuel,omitempty"`
	BaselineFuel uint64 `json:"baseline_fuel,omitempty"`
	Speed        string `json:"speed,omitempty"`
	// DurationMS and BaselineDurationMS are how long each replay ran, in
	// milliseconds: wall time, which moves with the machine's load.
	DurationMS         int64 `json:"duration_ms"`
	BaselineDurationMS int64 `json:"baseline_duration_ms"`
}

// ShadowSummary sums a shadow run's attempts.
type ShadowSummary struct {
	// Attempts is how many were replayed (or tried).
	Attempts int `json:"attempts"`
	// Outcomes counts them by the candidate's outcome ({"same": 98,
	// "different_output": 2}); never null.
	Outcomes map[string]int `json:"outcomes"`
	// Slower, Faster and Alike count them by speed.
	Slower int `json:"slower"`
	Faster int `json:"faster"`
	Alike  int `json:"alike"`
	// Fuel and BaselineFuel are the guest work of the attempts that both
	// replays ran.
	Fuel         uint64 `json:"fuel"`
	BaselineFuel uint64 `json:"baseline_fuel"`
}
