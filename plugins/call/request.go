package call

import "time"

// Request is one outbound HTTP request a guest made, as the host records
// it: never a body, a header value or the query, which may carry secrets.
type Request struct {
	Method string `json:"method"`
	// Host is the URL's host, with the port when it is not the scheme's
	// default.
	Host string `json:"host"`
	// Path is the URL's path, without the query.
	Path string `json:"path"`
	// Status is the response's status code; 0 when none arrived.
	Status int `json:"status,omitempty"`
	// Error says why no response was used: "timeout", "unreachable",
	// "tls", "bad_response", "not_granted", "limit", "cancelled" or
	// "rate_limiter_failed"; "rate_limited" when the rule's rate limit
	// kept the request from being sent (Status is then the 429 the guest
	// read in its place); or, on the one record after the runtime's limit
	// on a call's records (the first 1,000 requests are recorded),
	// "dropped".
	Error string `json:"error,omitempty"`
	// Sent and Received count body bytes.
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
	// Duration runs from the request's start to the end of its response
	// body, redirects included.
	Duration time.Duration `json:"duration_ns"`
	// Truncated is true when Method, Host or Path was longer than the
	// runtime records (64, 300 and 1,024 bytes) and was cut.
	Truncated bool `json:"truncated,omitempty"`
	// Rule is the pattern of the grant rule that allowed the request's
	// last hop, as the operator wrote it; empty when no rule did. Not
	// recorded in history: the metrics label requests with it, a value
	// the operator bounds, unlike the hosts a guest may ask for.
	Rule string `json:"-"`
}
