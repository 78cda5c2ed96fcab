package weft

import "time"

// RateLimitKey is one key of the rate limits (docs/flow-control.md, "Rate
// limits") as the host shows it: the terms of its last granted turn and
// the turns granted that have not come yet.
type RateLimitKey struct {
	// Kind says whose key it is: "step" for an activity step's
	// rate_limit, "host" for a grant's host rule. Steps of any workflow
	// share a step key; plugins share a host key.
	Kind string `json:"kind"`
	// Key is the key as the step or the rule names it.
	Key string `json:"key"`
	// Limit, Per and Burst are the terms of the last turn granted (each
	// caller brings its own terms).
	Limit int           `json:"limit"`
	Per   time.Duration `json:"per"`
	Burst int           `json:"burst"`
	// Ahead counts the turns granted that have not come yet: step
	// attempts deferred for their turn and requests waiting within their
	// rule's max_wait.
	Ahead int `json:"ahead"`
	// NextTurn is when a turn asked for now would come (now when one is
	// free).
	NextTurn time.Time `json:"next_turn"`
}
