package weft

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Definition is one version of a workflow definition.
type Definition struct {
	Name string `json:"name"`
	// Version is 1 for the first definition of a name and +1 for each
	// change. Versions are never reused, not even after DeleteDefinition.
	Version int `json:"version"`
	// Hash identifies the content (of the canonical form); PutDefinition
	// compares it with the latest version's.
	Hash   string `json:"hash"`
	Source []byte `json:"source"`
	// CreatedAt is set by the store.
	CreatedAt time.Time `json:"created_at"`
}

// ErrInvalidDefinition: a definition failed to parse or validate; see
// *DefinitionError for the list of problems.
var ErrInvalidDefinition = errors.New("invalid workflow definition")

// Problem is one reason a document (a workflow definition, a schedule)
// was refused: where, and what is wrong, so that an HTTP layer can return
// every problem as problem+json `errors: [{path, message, line, column}]`.
type Problem struct {
	// Path locates the problem in the document, e.g. `steps[2].retry.backoff`
	// or `spec.cron[1]`; "$" or "" for the whole document.
	Path string `json:"path"`
	// Message says what is wrong, e.g. `backoff 0.5 is less than 1`.
	Message string `json:"message"`
	// Line and Column are 1-based and locate the problem in the source text.
	// They are zero when unknown (a problem of the definition as a whole, or
	// of a field without a place in the text).
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// String formats the problem as "path: message", and its place when it
// has one.
func (p Problem) String() string {
	if p.Line > 0 && p.Column == 0 {
		return fmt.Sprintf("%s: %s (line %d)", p.Path, p.Message, p.Line)
	}
	if p.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d, column %d)", p.Path, p.Message, p.Line, p.Column)
	}
	return p.Path + ": " + p.Message
}

// DefinitionError lists every problem found in a definition, in document
// order. It matches ErrInvalidDefinition.
type DefinitionError struct {
	// Name is the workflow's name when it could be read, else empty.
	Name     string
	Problems []Problem
}

// Error implements error.
func (e *DefinitionError) Error() string {
	return problemsError("invalid workflow definition", e.Name, e.Problems)
}

// problemsError formats a document's problems on one line: what, the
// document's name when it has one, and each problem.
func problemsError(what, name string, ps []Problem) string {
	var b strings.Builder
	b.WriteString(what)
	if name != "" {
		fmt.Fprintf(&b, " %q", name)
	}
	b.WriteString(": ")
	for i, p := range ps {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes a *DefinitionError match ErrInvalidDefinition.
func (e *DefinitionError) Is(target error) bool { return target == ErrInvalidDefinition }
