package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/weftworks/weft/host/api/apiv1"
)

// Sentinels an *Error matches, by status.
var (
	// ErrInvalid: 400 or 422, the request or what it carries is invalid.
	ErrInvalid = errors.New("invalid request")
	// ErrUnauthorized: 401, no token or a wrong one.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrForbidden: 403, the token's role may not do this.
	ErrForbidden = errors.New("forbidden")
	// ErrNotFound: 404.
	ErrNotFound = errors.New("not found")
	// ErrConflict: 409, e.g. a plugin in use or an instance already ended.
	ErrConflict = errors.New("conflict")
	// ErrStale: 412, a write made for a revision that is no longer the
	// stored one (PutGrantsAt): read again and redo the change.
	ErrStale = errors.New("stale revision")
	// ErrUnavailable: 503, the host cannot serve now.
	ErrUnavailable = errors.New("unavailable")
	// ErrInvalidQuery: 400 invalid-query, a search's query that does not
	// parse or type (InstanceFilter.Query); the *Error's Position and
	// Token say where. It matches ErrInvalid too.
	ErrInvalidQuery = errors.New("invalid query")
)

// Error is an error answer: the server's problem document (RFC 9457
// problem+json), whose fields it has. errors.Is matches it against the
// sentinel of its status (ErrNotFound for a 404…), and errors.As finds the
// problem as an *Error or as an *apiv1.Problem. An answer with an error
// status that is not a problem document (from a proxy, say) becomes a
// problem with the status and the start of the body as Detail.
//
// The problem document is the API's (apiv1.Problem); the matching is the
// client's, which is why an Error wraps one.
type Error struct {
	apiv1.Problem
}

// Error formats the problem on one line: status, title, detail and the
// field errors.
func (e *Error) Error() string { return e.Problem.Error() }

// Is matches the sentinel of the problem's status, and ErrInvalidQuery
// that of its type.
func (e *Error) Is(target error) bool {
	if target == ErrInvalidQuery {
		return e.Status == http.StatusBadRequest && e.Type == problemInvalidQuery
	}
	switch e.Status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		return target == ErrInvalid
	case http.StatusUnauthorized:
		return target == ErrUnauthorized
	case http.StatusForbidden:
		return target == ErrForbidden
	case http.StatusNotFound:
		return target == ErrNotFound
	case http.StatusConflict:
		return target == ErrConflict
	case http.StatusPreconditionFailed:
		return target == ErrStale
	case http.StatusServiceUnavailable:
		return target == ErrUnavailable
	}
	return false
}

// Unwrap returns the problem document, for errors.As to an
// *apiv1.Problem.
func (e *Error) Unwrap() error { return &e.Problem }

// newError decodes an error answer.
func newError(resp *http.Response, body []byte) *Error {
	var p apiv1.Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Title == "" && p.Detail == "" {
		detail := string(bytes.TrimSpace(body))
		if len(detail) > 200 {
			detail = detail[:200] + "…"
		}
		p = apiv1.Problem{Detail: detail}
	}
	p.Status = resp.StatusCode
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	if p.RequestID == "" {
		p.RequestID = resp.Header.Get("X-Request-Id")
	}
	return &Error{Problem: p}
}

// TransportError is a call that got no usable answer: the server could not
// be reached, or its answer could not be read or decoded.
type TransportError struct {
	Method string
	URL    string
	Err    error
}

// Error says which call failed, and why.
func (e *TransportError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Method, e.URL, e.Err)
}

// Unwrap returns why the call failed.
func (e *TransportError) Unwrap() error { return e.Err }
