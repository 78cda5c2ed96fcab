package weft

import "fmt"

// Order is where an instance's work goes in the ready queue
// (docs/flow-control.md): Priority 1 is handed out first and 5 last (0 is
// DefaultPriority); within a priority, the instances of each fairness key
// take turns with the other keys' instances, up to FairnessWeight at a
// time (0 is 1), and within a key the first queued goes first. It is
// decided when the instance is created (the start's own, else its
// parent's, else its definition's) and kept with it; its timers,
// bookmarks and its children's ParentRef carry a copy, so that work found
// through them is queued in the instance's place without reading it.
type Order struct {
	Priority       int    `json:"priority,omitempty"`
	FairnessKey    string `json:"fairness_key,omitempty"`
	FairnessWeight int    `json:"fairness_weight,omitempty"`
}

// The bounds and defaults of an Order.
const (
	// HighestPriority is handed out before every other priority.
	HighestPriority = 1
	// LowestPriority is handed out only when no other priority has work.
	LowestPriority = 5
	// DefaultPriority is the priority of an instance whose start and
	// definition set none (an Order's Priority 0).
	DefaultPriority = 3
	// MaxFairnessKey bounds a fairness key, in bytes: a key is kept with
	// every queued item and named in listings, so that a tenant's id
	// fits and a document does not.
	MaxFairnessKey = 256
	// MaxFairnessWeight bounds a fairness weight: a key's turn is at most
	// this many items in a row, so that no weight makes the other keys
	// wait for a whole backlog.
	MaxFairnessWeight = 1000
	// DefaultFairnessWeight is the weight of a key that sets none (an
	// Order's FairnessWeight 0): one item a turn.
	DefaultFairnessWeight = 1
)

// Check returns an error matching ErrInvalid that names the field when o
// is out of bounds.
func (o Order) Check() error {
	switch {
	case o.Priority != 0 && (o.Priority < HighestPriority || o.Priority > LowestPriority):
		return fmt.Errorf("%w: priority %d is not from %d (first) to %d (last)", ErrInvalid, o.Priority, HighestPriority, LowestPriority)
	case len(o.FairnessKey) > MaxFairnessKey:
		return fmt.Errorf("%w: fairness key of %d bytes is longer than %d", ErrInvalid, len(o.FairnessKey), MaxFairnessKey)
	case o.FairnessWeight < 0 || o.FairnessWeight > MaxFairnessWeight:
		return fmt.Errorf("%w: fairness weight %d is not from 1 to %d", ErrInvalid, o.FairnessWeight, MaxFairnessWeight)
	}
	return nil
}

// StartOptions are a start's choices beyond its workflow and input.
type StartOptions struct {
	// ID makes the start idempotent: a start with the id of an instance
	// of the same workflow returns that instance; "" gives a new id.
	ID string
	// Priority, when not 0, is the instance's priority (HighestPriority
	// … LowestPriority), before the one its definition computes.
	Priority int
}
