package weft

// Event is an event a client sends (POST /v1/events) before the host
// keeps it as a Stimulus: it resumes the instances waiting for its
// name and key, and starts the workflows whose triggers name it.
type Event struct {
	// ID makes the event idempotent; empty gets a random one.
	ID      string
	Name    string
	Key     string
	Payload any
	// Priority, when not 0, is the priority of the instances the event's
	// triggers start (weft.HighestPriority … weft.LowestPriority), before
	// the ones their definitions compute.
	Priority int
}

// SignalOutcome is what an event did.
type SignalOutcome struct {
	ID      string   `json:"id"`
	Resumed []string `json:"resumed"`
	Started []string `json:"started"`
	// Queued is true when nothing waited for it and nothing started: it
	// waits, until its TTL, for a bookmark to appear.
	Queued bool `json:"queued"`
	// Warning, when set, says that no saved workflow waits for or is
	// triggered by the event's name: a typo, as a rule, which would
	// otherwise only show as a dead letter when the TTL ends.
	Warning string `json:"warning,omitempty"`
}
