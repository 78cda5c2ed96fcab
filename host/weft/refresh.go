package weft

// The statuses of a RefreshResult.
const (
	// Refreshed: the refresh read the files and saved what changed.
	Refreshed = "refreshed"
	// RefreshInProgress: another refresh of the same definitions held
	// their lock, on this node or another; this one did nothing.
	RefreshInProgress = "already_in_progress"
)

// RefreshResult is what a refresh of definitions from the workflows
// directory did.
type RefreshResult struct {
	// Status is Refreshed or RefreshInProgress.
	Status string `json:"status"`
	// Files lists, for each definition file read, what became of it.
	Files []RefreshedFile `json:"files,omitempty"`
}

// RefreshedFile is one definition file of a refresh.
type RefreshedFile struct {
	File     string    `json:"file"`
	Name     string    `json:"name,omitempty"`
	Version  int       `json:"version,omitempty"`
	Created  bool      `json:"created"`
	Problems []Problem `json:"problems,omitempty"`
	Error    string    `json:"error,omitempty"`
}
