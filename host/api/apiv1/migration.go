package apiv1

import "time"

// ResetPoint is a step an instance can be reset to
// (GET /v1/instances/{id}/reset-points): a top-level step it began, at its
// last beginning, and whether the variables it began with were recorded
// (docs/operations.md, "Reset").
type ResetPoint struct {
	// Step is the step's id; Index its place in the definition's steps.
	Step  string `json:"step"`
	Index int    `json:"index"`
	// Seq and Time are those of the step's last step_started entry.
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Vars says whether the variables are recorded, which a reset to the
	// step needs; Reason says why not when they are not.
	Vars   bool   `json:"vars"`
	Reason string `json:"reason,omitempty"`
}

// ResetRequest is the body of POST /v1/instances/{id}/reset.
type ResetRequest struct {
	// Step is the top-level step to run the instance again from; required.
	Step string `json:"step"`
	// Reason is why; the instance_reset entry records it. Default: reset
	// through the API.
	Reason string `json:"reason,omitempty"`
}

// MigrateRequest is the optional body of POST /v1/instances/{id}/migrate
// (docs/operations.md, "Migrate").
type MigrateRequest struct {
	// Version is the workflow version to move to; 0 for the latest.
	Version int `json:"version,omitempty"`
	// Plugins pins plugins, by name, to other versions (a version's
	// sha256); a plugin not named keeps the instance's pin.
	Plugins map[string]string `json:"plugins,omitempty"`
	// DryRun answers the plan and sends nothing.
	DryRun bool `json:"dry_run,omitempty"`
	// Then is what the instance does once moved: ThenRetry (a failed
	// one continues from its failed step), ThenResume (a paused one
	// resumes), or "" (nothing more).
	Then MigrateThen `json:"then,omitempty"`
	// Reason is why; the instance_migrated entry records it. Default:
	// migrated through the API.
	Reason string `json:"reason,omitempty"`
}

// MigrateThen is what a migrated instance does once moved.
type MigrateThen string

// What a migrated instance may do once moved.
const (
	ThenRetry  MigrateThen = "retry"
	ThenResume MigrateThen = "resume"
)

// MigrationPlan says whether an instance can move to a migration's
// target, and how: the answer of a migration, dry run or not, and the
// migration member of the problem of one refused.
type MigrationPlan struct {
	Instance string `json:"instance"`
	// CanMove: the instance is at rest (suspended, paused or failed),
	// every step it has work left in is in the target in the same place
	// and of the same kind, and every plugin version the rest of its run
	// calls has the activities it calls.
	CanMove     bool `json:"can_move"`
	FromVersion int  `json:"from_version"`
	ToVersion   int  `json:"to_version"`
	// At is where the instance is, in both versions.
	At []MigrationPoint `json:"at"`
	// Problems say why it cannot move; empty when it can.
	Problems []MigrationProblem `json:"problems"`
	// Notes say what the move changes for the rest of the run.
	Notes []string `json:"notes"`
	// Plugins are the plugin pins that change, by name.
	Plugins map[string]PinChange `json:"plugins,omitempty"`
}

// MigrationPoint is one place where an instance is: the step, its kind,
// and its path before and after the move ("steps[2]").
type MigrationPoint struct {
	Step string `json:"step"`
	Kind string `json:"kind"`
	From string `json:"from"`
	To   string `json:"to"`
}

// MigrationProblem is one reason an instance cannot move: the step (empty
// for one of the whole instance) and its path, and what is wrong.
type MigrationProblem struct {
	Step    string `json:"step,omitempty"`
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// PinChange is a plugin pin a migration changes: the version before ("" for
// a plugin the instance did not pin) and after.
type PinChange struct {
	From string `json:"from,omitempty"`
	To   string `json:"to"`
}
