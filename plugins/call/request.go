package call

import "time"

// The most bytes of a Request's fields, as recorded: a longer value is cut
// at a UTF-8 boundary and the record marked Truncated. With MaxRecords,
// they bound what a call's requests add to its attempt's history entry
// (about 1.4 MiB at most).
const (
	MaxRecordMethodBytes = 64
	MaxRecordHostBytes   = 300
	MaxRecordPathBytes   = 1024
)

// MaxRecords is how many of a call's requests are recorded: the first
// MaxRecords, then one record whose Error is "dropped" and whose other
// fields are empty, which says that the call made more requests (and the
// metrics did not count them). A call makes at most plugins.http.max_requests
// requests, 100 unless configured higher.
const MaxRecords = 1000

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
	// "tls", "bad_response", "not_granted", "limit" or "cancelled"; or,
	// on the record after the first MaxRecords, "dropped".
	Error string `json:"error,omitempty"`
	// Sent and Received count body bytes.
	Sent     int64 `json:"sent"`
	Received int64 `json:"received"`
	// Duration runs from the request's start to the end of its response
	// body, redirects included.
	Duration time.Duration `json:"duration_ns"`
	// Truncated is true when Method, Host or Path was longer than its
	// limit (MaxRecordMethodBytes, …) and was cut.
	Truncated bool `json:"truncated,omitempty"`
	// Rule is the pattern of the grant rule that allowed the request's
	// last hop, as the operator wrote it; empty when no rule did. Not
	// recorded in history: the metrics label requests with it, a value
	// the operator bounds, unlike the hosts a guest may ask for.
	Rule string `json:"-"`
}
