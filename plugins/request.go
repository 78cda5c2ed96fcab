package plugins

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
	// "tls", "bad_response", "not_granted", "limit" or "cancelled".
	Error string `json:"error,omitempty"`
	// Sent and Received count body bytes.
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
	// Duration runs from the request's start to the end of its response
	// body, redirects included.
	Duration time.Duration `json:"duration_ns"`
}
