package store

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

// PluginRecord is one version of a plugin, as stored after validation.
type PluginRecord struct {
	Name string `json:"name"`
	// Version is the content hash (sha256 hex) of the module.
	Version    string   `json:"version"`
	Size       int64    `json:"size"`
	Activities []string `json:"activities,omitempty"`
	// CreatedAt is set by the store when the version becomes current.
	CreatedAt time.Time `json:"created_at"`
}

// Plugin is a plugin's current version and its history.
type Plugin struct {
	// Current is the version new instances use.
	Current PluginRecord `json:"current"`
	// Versions lists every version kept, current first, then by the time
	// each became current, newest first.
	Versions []PluginRecord `json:"versions"`
}
