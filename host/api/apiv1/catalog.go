package apiv1

import (
	"encoding/json"
	"time"
)

// Plugin is one version of a plugin.
type Plugin struct {
	Name string `json:"name"`
	// Version is the sha256 of the module, hex.
	Version string `json:"version"`
	// Size is the module's size in bytes.
	Size       int64     `json:"size"`
	Activities []string  `json:"activities"`
	CreatedAt  time.Time `json:"created_at"`
}

// PluginDetail is a plugin's current version and every version kept,
// current first, with what the current version asks an operator to grant
// (Needs, from its manifest), what is granted to the name (Granted) and
// what of Needs no grant covers (Missing).
type PluginDetail struct {
	Plugin
	Versions []Plugin `json:"versions"`
	Needs    Needs    `json:"needs"`
	Granted  Grants   `json:"granted"`
	Missing  Needs    `json:"missing"`
}

// Needs is what a plugin asks to be granted, or what of it is not: host
// patterns, configuration keys and secret names. Every list is empty
// rather than null.
type Needs struct {
	Hosts   []string `json:"hosts"`
	Config  []string `json:"config"`
	Secrets []string `json:"secrets"`
}

// Grants is what is granted to a plugin name (GET and PUT
// /v1/plugins/{name}/grants): the hosts its HTTP requests may reach, its
// configuration values and its secrets, as references (env:NAME,
// file:/path) that each node resolves. The API never answers a secret's
// value.
type Grants struct {
	Plugin string `json:"plugin"`
	// Revision is 1 for the first grant of a name and +1 for each change;
	// 0 when nothing is granted. The answer's ETag is the revision,
	// quoted, which a write's If-Match names.
	Revision uint64 `json:"revision"`
	// UpdatedAt is null when nothing is granted.
	UpdatedAt *time.Time        `json:"updated_at"`
	Hosts     []GrantHost       `json:"hosts"`
	Config    map[string]string `json:"config"`
	Secrets   map[string]string `json:"secrets"`
}

// Document returns the grant document of g, which shares its lists and
// maps: what a PUT of it would grant.
func (g *Grants) Document() GrantDocument {
	return GrantDocument{Hosts: g.Hosts, Config: g.Config, Secrets: g.Secrets}
}

// GrantHost is one host rule of a grant.
type GrantHost struct {
	// Pattern is [scheme://]host[:port]: https unless it says http://; a
	// DNS name, *.suffix (any name below it), an IP literal ([v6] in
	// brackets) or *; a port number or *, else only the scheme's default
	// port.
	Pattern string `json:"pattern"`
	// PrivateNetworks lets requests under this rule reach loopback,
	// private, link-local and other non-public addresses; cloud metadata
	// addresses never.
	PrivateNetworks bool `json:"private_networks"`
	// RateLimit, when present, limits the requests sent under this rule,
	// on a budget every rule with the same key shares, across plugins and
	// nodes (docs/outbound-http.md, "Rate limits").
	RateLimit *GrantRateLimit `json:"rate_limit,omitempty"`
}

// GrantRateLimit is a host rule's rate limit: Limit requests per Per, up
// to Burst at once; a request whose turn is further away than MaxWait is
// not sent, and the plugin gets a 429.
type GrantRateLimit struct {
	// Limit is how many requests per Per: 1 to 1,000,000.
	Limit int `json:"limit"`
	// Per is the period, a Go duration ("1s", "1m"): 1ms to 24h.
	Per string `json:"per"`
	// Burst is how many requests may go at once after a quiet period: 1
	// to 1,000,000; absent is 1.
	Burst int `json:"burst,omitempty"`
	// MaxWait is how long a request may wait for its turn, a Go duration:
	// 0 to 5m; absent is 0.
	MaxWait string `json:"max_wait,omitempty"`
	// Key names the budget; absent is the rule's pattern as written.
	Key string `json:"key,omitempty"`
}

// GrantDocument is the body of PUT /v1/plugins/{name}/grants: everything
// granted to the plugin name, which replaces what was.
type GrantDocument struct {
	Hosts []GrantHost `json:"hosts,omitempty"`
	// Config holds the values the plugin reads with the config host
	// function.
	Config map[string]string `json:"config,omitempty"`
	// Secrets maps each secret name the plugin may read to a reference:
	// env:NAME (a variable of the host process) or file:/absolute/path.
	Secrets map[string]string `json:"secrets,omitempty"`
}

// Workflow is one version of a workflow definition. Source, Definition and
// Versions are set when one definition is shown (GET
// /v1/workflows/{name}), not in lists nor in the answer of a save.
type Workflow struct {
	Name      string    `json:"name"`
	Version   int       `json:"version"`
	Hash      string    `json:"hash"`
	CreatedAt time.Time `json:"created_at"`
	// Source is the definition as it was saved (YAML or JSON).
	Source *string `json:"source,omitempty"`
	// Definition is the source parsed, in its canonical JSON form
	// (defaults filled in, expressions as written): what a client that
	// draws or checks the steps reads, so that it needs no YAML parser.
	Definition json.RawMessage `json:"definition,omitempty"`
	// Versions lists the versions kept, the latest first: a deletion
	// leaves a gap in the numbers, so a client cannot count them down
	// from the latest.
	Versions []WorkflowVersion `json:"versions,omitempty"`
	// Paused is set while the workflow is paused (in lists too): its new
	// starts are held until it is resumed. Its Held is counted when one
	// workflow is shown.
	Paused *WorkflowPause `json:"paused,omitempty"`
}

// WorkflowVersion is one version kept of a workflow.
type WorkflowVersion struct {
	Version   int       `json:"version"`
	CreatedAt time.Time `json:"created_at"`
}
