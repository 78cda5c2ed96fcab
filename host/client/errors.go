package client

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Sentinels a *Problem matches, by status.
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
)

// Problem is an error answer (RFC 9457 problem+json). An answer with an
// error status that is not a problem document (from a proxy, say) becomes
// a Problem with the status and the start of the body as Detail.
type Problem struct {
	Type      string       `json:"type"`
	Title     string       `json:"title"`
	Status    int          `json:"status"`
	Detail    string       `json:"detail,omitempty"`
	Errors    []FieldError `json:"errors,omitempty"`
	Instances []string     `json:"instances,omitempty"`
	RequestID string       `json:"request_id,omitempty"`
}

// FieldError is one validation problem: where (a JSON path, a definition
// path such as steps[2].retry.backoff, a parameter) and what.
type FieldError struct {
	Path    string `json:"path"`
	Message string `json:"message"`
	Line    int    `json:"line,omitempty"`
	Column  int    `json:"column,omitempty"`
}

// String formats the field error as "path: message (line L, column C)".
func (f FieldError) String() string {
	s := f.Path + ": " + f.Message
	if f.Path == "" {
		s = f.Message
	}
	switch {
	case f.Line > 0 && f.Column > 0:
		s += fmt.Sprintf(" (line %d, column %d)", f.Line, f.Column)
	case f.Line > 0:
		s += fmt.Sprintf(" (line %d)", f.Line)
	}
	return s
}

// Error formats the problem on one line: status, title, detail and the
// field errors.
func (p *Problem) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d %s", p.Status, p.Title)
	if p.Detail != "" {
		b.WriteString(": " + p.Detail)
	}
	for _, e := range p.Errors {
		b.WriteString("; " + e.String())
	}
	return b.String()
}

// Is matches the sentinel of p's status.
func (p *Problem) Is(target error) bool {
	switch p.Status {
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

// newProblem decodes an error answer.
func newProblem(resp *http.Response, body []byte) *Problem {
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil || p.Title == "" && p.Detail == "" {
		detail := string(bytes.TrimSpace(body))
		if len(detail) > 200 {
			detail = detail[:200] + "…"
		}
		p = Problem{Detail: detail}
	}
	p.Status = resp.StatusCode
	if p.Title == "" {
		p.Title = http.StatusText(resp.StatusCode)
	}
	if p.RequestID == "" {
		p.RequestID = resp.Header.Get("X-Request-Id")
	}
	return &p
}

// TransportError is a call that got no usable answer: the server could not
// be reached, or its answer could not be read or decoded.
type TransportError struct {
	Method string
	URL    string
	Err    error
}

func (e *TransportError) Error() string {
	return fmt.Sprintf("%s %s: %v", e.Method, e.URL, e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }
