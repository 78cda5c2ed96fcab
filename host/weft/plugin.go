package weft

import (
	"time"

	"github.com/weftworks/weft/abi"
)

// PluginRecord is one version of a plugin, as stored after validation.
type PluginRecord struct {
	Name string `json:"name"`
	// Version is the content hash (sha256 hex) of the module.
	Version    string   `json:"version"`
	Size       int64    `json:"size"`
	Activities []string `json:"activities,omitempty"`
	// Needs is what the version's manifest asks an operator to grant;
	// nil when it asks nothing.
	Needs *abi.Needs `json:"needs,omitempty"`
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
