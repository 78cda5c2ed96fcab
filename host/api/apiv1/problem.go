package apiv1

import (
	"fmt"
	"strings"
)

// ProblemContentType is the media type of an error answer (RFC 9457).
const ProblemContentType = "application/problem+json"

// Problem is the document of an error answer (RFC 9457 problem+json). It
// is an error, so that the API's handlers can return one and a client can
// wrap one.
type Problem struct {
	// Type identifies the kind of problem: "urn:weft:problem:" and a slug
	// such as not-found, validation, conflict.
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail,omitempty"`
	// Errors lists each validation problem with where it is.
	Errors []FieldError `json:"errors,omitempty"`
	// Instances names the instances involved (a plugin in use).
	Instances []string `json:"instances,omitempty"`
	// Workflows, for an in-use problem, names the saved workflows that use
	// the plugin.
	Workflows []string `json:"workflows,omitempty"`
	// Position, for an invalid-query problem, is the byte offset (from 0)
	// of the offending token in the query's text, and Token that token as
	// written ("" when the problem is at the end of the query or concerns
	// all of it): where a console or a CLI points.
	Position *int   `json:"position,omitempty"`
	Token    string `json:"token,omitempty"`
	// Migration, for a migration refused (POST
	// /v1/instances/{id}/migrate), is its plan: why the instance cannot
	// move.
	Migration *MigrationPlan `json:"migration,omitempty"`
	// RequestID is the request's X-Request-Id, to find its log lines.
	RequestID string `json:"request_id,omitempty"`
}

// Error formats the problem on one line: its status, title and detail,
// then its field errors.
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

// FieldError is one validation problem. Path locates it (a JSON path into
// the request, a definition path such as steps[2].retry.backoff, or a
// parameter name); Line and Column locate it in a definition's source text
// when known.
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
