package weft

import "time"

// Definition is one version of a workflow definition.
type Definition struct {
	Name string `json:"name"`
	// Version is 1 for the first definition of a name and +1 for each
	// change. Versions are never reused, not even after DeleteDefinition.
	Version int `json:"version"`
	// Hash identifies the content (of the canonical form); PutDefinition
	// compares it with the latest version's.
	Hash   string `json:"hash"`
	Source []byte `json:"source"`
	// CreatedAt is set by the store.
	CreatedAt time.Time `json:"created_at"`
}
