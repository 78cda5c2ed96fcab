package definition

import (
	"errors"
	"fmt"
	"strings"
)

// RootPath is the Path of a problem that concerns the whole document, such
// as a syntax error or an empty document.
const RootPath = "$"

// Sentinels matched by errors.Is.
var (
	// ErrInvalid: a definition failed to parse or validate; see
	// *ValidationError for the list of problems.
	ErrInvalid = errors.New("invalid workflow definition")
	// ErrEval: an expression failed while being evaluated; see *EvalError.
	ErrEval = errors.New("expression failed")
)

// Problem is one reason a definition was refused. Parse and Load report
// problems of the same shape so that an HTTP layer can return them as
// problem+json `errors: [{path, message}]`.
type Problem struct {
	// Path locates the problem in the document, e.g. `steps[2].retry.backoff`
	// or `steps[1].then[0].wait.key`; RootPath for the whole document.
	Path string `json:"path"`
	// Message says what is wrong, e.g. `backoff 0.5 is less than 1`.
	Message string `json:"message"`
	// Line and Column are 1-based and locate the problem in the source text.
	// They are zero when unknown (a problem of the definition as a whole, or
	// of a field without a place in the text).
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// String formats the problem as "path: message".
func (p Problem) String() string {
	if p.Line > 0 && p.Column == 0 {
		return fmt.Sprintf("%s: %s (line %d)", p.Path, p.Message, p.Line)
	}
	if p.Line > 0 {
		return fmt.Sprintf("%s: %s (line %d, column %d)", p.Path, p.Message, p.Line, p.Column)
	}
	return p.Path + ": " + p.Message
}

// ValidationError lists every problem found in a definition, in document
// order. It matches ErrInvalid.
type ValidationError struct {
	// Name is the workflow's name when it could be read, else empty.
	Name     string
	Problems []Problem
}

// Error implements error.
func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("invalid workflow definition")
	if e.Name != "" {
		fmt.Fprintf(&b, " %q", e.Name)
	}
	b.WriteString(": ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// Is makes a *ValidationError match ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// EvalError is returned by Value.Eval and its typed variants when an
// expression fails at run time or yields the wrong type. It matches ErrEval.
type EvalError struct {
	// Source is the expression as written, e.g. `${ input.total > 1000 }`.
	Source string
	// Err is the reason.
	Err error
}

// Error implements error.
func (e *EvalError) Error() string {
	return fmt.Sprintf("expression %q: %v", e.Source, e.Err)
}

// Unwrap returns the reason.
func (e *EvalError) Unwrap() error { return e.Err }

// Is makes an *EvalError match ErrEval.
func (e *EvalError) Is(target error) bool { return target == ErrEval }
