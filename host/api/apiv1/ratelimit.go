package apiv1

import "time"

// RateLimitKey is one key of the rate limits (docs/flow-control.md) as the
// API shows it: whose key it is, the terms of its last granted turn, and
// the turns granted that have not come yet. GET /v1/rate-limits lists the
// keys whose granted turns reach past now; an idle key is not kept.
type RateLimitKey struct {
	// Kind says whose key it is: an activity step's rate_limit, shared by
	// the steps of any workflow that name it, or a grant's host rule,
	// shared by the plugins whose rules name it.
	Kind RateLimitKind `json:"kind"`
	// Key is the key as the step or the rule names it.
	Key string `json:"key"`
	// Limit turns per Per (a Go duration, as "1s" or "1h0m0s"), up to
	// Burst at once: the terms of the key's last turn granted, since each
	// caller brings its own.
	Limit int    `json:"limit"`
	Per   string `json:"per"`
	Burst int    `json:"burst"`
	// Ahead counts the turns granted that have not come yet: the step
	// attempts deferred for their turn, the requests waiting for theirs
	// within their rule's max_wait.
	Ahead int `json:"ahead"`
	// NextTurn is when a turn asked for now would come: now, or close
	// to it, when one is free.
	NextTurn time.Time `json:"next_turn"`
}

// RateLimitKind says whose a rate limit key is.
type RateLimitKind string

// The kinds of rate limit keys. A step key and a host key of one name are
// two budgets.
const (
	// RateLimitStep is an activity step's rate_limit (docs/flow-control.md,
	// "Step limits").
	RateLimitStep RateLimitKind = "step"
	// RateLimitHost is a grant's host rule's rate_limit
	// (docs/outbound-http.md, "Rate limits").
	RateLimitHost RateLimitKind = "host"
)

// RateLimits is GET /v1/rate-limits's answer: the keys, sorted by kind
// (steps first) and key, and whether there were more than the limit
// asked for. It has no cursor: the keys come and go with their turns, so
// narrow the list with ?prefix= instead.
type RateLimits struct {
	// Items is never null.
	Items     []RateLimitKey `json:"items"`
	Truncated bool           `json:"truncated"`
}
