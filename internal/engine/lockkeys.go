package engine

import (
	"slices"
	"strings"
)

// The engine's lock keys. The lock package takes any key; what the keys
// of workflow operations are is the engine's to say.

// InstanceLockKey returns the key held by every operation that writes the
// workflow instance id (run, resume, cancel, delete, import):
// "workflow-instance:" + id.
func InstanceLockKey(id string) string { return "workflow-instance:" + id }

// RefreshAllLockKey is the key of a refresh of every workflow definition.
const RefreshAllLockKey = "workflow-definitions-refresh:all"

// RefreshLockKey returns the key of a refresh of the named workflow
// definitions: [RefreshAllLockKey] when names is empty, otherwise
// "workflow-definitions-refresh:" + the sorted, comma-joined names.
// Duplicate names count once, so equal sets of names give equal keys.
// names is not modified.
func RefreshLockKey(names []string) string {
	if len(names) == 0 {
		return RefreshAllLockKey
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	return "workflow-definitions-refresh:" + strings.Join(sorted, ",")
}
