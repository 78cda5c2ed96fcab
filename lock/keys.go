package lock

import (
	"slices"
	"strings"
)

// InstanceKey returns the key held by every operation that writes the
// workflow instance id (run, resume, cancel, delete, import):
// "workflow-instance:" + id.
func InstanceKey(id string) string { return "workflow-instance:" + id }

// RefreshAllKey is the key of a refresh of every workflow definition.
const RefreshAllKey = "workflow-definitions-refresh:all"

// RefreshKey returns the key of a refresh of the named workflow definitions:
// [RefreshAllKey] when names is empty, otherwise
// "workflow-definitions-refresh:" + the sorted, comma-joined names. Duplicate
// names count once, so equal sets of names give equal keys. names is not
// modified.
func RefreshKey(names []string) string {
	if len(names) == 0 {
		return RefreshAllKey
	}
	sorted := slices.Clone(names)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	return "workflow-definitions-refresh:" + strings.Join(sorted, ",")
}
