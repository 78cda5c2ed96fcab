package weft

import "encoding/json"

// SnapshotFormat versions the snapshot an export writes and an import reads.
const SnapshotFormat = 1

// Snapshot is an instance exported whole: its record, the runner's state,
// its bookmarks, timers and inbox; enough to recreate it on another host
// (or the same one, after a delete) and carry on.
type Snapshot struct {
	Format    int             `json:"format"`
	Instance  Instance        `json:"instance"`
	Runner    json.RawMessage `json:"runner"`
	Bookmarks []Bookmark      `json:"bookmarks"`
	Timers    []Timer         `json:"timers"`
	Inbox     []Message       `json:"inbox"`
}
