package weft

// MigrationTarget is where a migration moves an instance
// (docs/operations.md, "Migrate"): another version of its workflow, other
// versions of its plugins, or both.
type MigrationTarget struct {
	// Version is the workflow version to move to; 0 is the latest.
	Version int `json:"version,omitempty"`
	// Plugins pins plugins, by name, to other versions (a version's
	// sha256); a plugin not named keeps the instance's pin, and one only
	// the target version calls gets its current version.
	Plugins map[string]string `json:"plugins,omitempty"`
}

// MigrationPlan says whether an instance can move to a MigrationTarget,
// and how: a migration's dry run answers it, and a migration refused
// records it.
type MigrationPlan struct {
	Instance string `json:"instance"`
	// CanMove: the instance is at rest (suspended, paused or failed, no
	// attempt in flight), every step it has not finished is in the
	// target in the same place and of the same kind, and every plugin
	// version the rest of its run calls has the activities it calls.
	CanMove bool `json:"can_move"`
	// FromVersion and ToVersion are the workflow versions.
	FromVersion int `json:"from_version"`
	ToVersion   int `json:"to_version"`
	// At is where the instance is, in both versions.
	At []MigrationPoint `json:"at"`
	// Problems say why it cannot move; empty when it can.
	Problems []MigrationProblem `json:"problems"`
	// Notes say what the move changes for the rest of the run: new steps
	// that will run, or not; an activity that calls another plugin.
	Notes []string `json:"notes"`
	// Plugins are the plugin pins that change, by name.
	Plugins map[string]PinChange `json:"plugins,omitempty"`
}

// MigrationPoint is where an instance is, one frame of its state: the step
// under the frame's cursor, and its path in the instance before and after
// the move.
type MigrationPoint struct {
	Step string `json:"step"`
	Kind string `json:"kind"`
	// From and To are the step's path ("steps[2]", "steps[1].do#0[1]").
	From string `json:"from"`
	To   string `json:"to"`
}

// MigrationProblem is one reason an instance cannot move.
type MigrationProblem struct {
	// Step is the step's id; empty for a problem of the whole instance
	// (its status, a plugin version).
	Step string `json:"step,omitempty"`
	// Path is where the step is in the instance before the move; for a
	// step only the target has, where it would be after.
	Path    string `json:"path,omitempty"`
	Message string `json:"message"`
}

// PinChange is a plugin pin a migration changes: the version before and
// after ("" for a plugin the instance did not pin before).
type PinChange struct {
	From string `json:"from,omitempty"`
	To   string `json:"to"`
}
