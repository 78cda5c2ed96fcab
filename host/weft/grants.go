package weft

import "time"

// Grants is what an operator granted one plugin name, as stored. The store
// keeps the document as given; package plugins/grant parses and checks it.
// Grants belong to the name, not to a version or to the plugin's record:
// they may be set before the plugin is uploaded, every version uses them,
// and deleting the plugin leaves them.
type Grants struct {
	Plugin string `json:"plugin"`
	// Document is the grant document (JSON).
	Document []byte `json:"document"`
	// Revision is 1 for the first PutGrants of a name and +1 for each
	// change, never reused, so that a reader can tell a changed document
	// without comparing it.
	Revision uint64 `json:"revision"`
	// UpdatedAt is set by the store.
	UpdatedAt time.Time `json:"updated_at"`
}

// AnyRevision is the ifRevision of a grants write (node.PutGrants) that
// writes whatever revision is stored.
const AnyRevision = ^uint64(0)
