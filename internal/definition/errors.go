package definition

import (
	"errors"
	"fmt"
)

// RootPath is the Path of a problem that concerns the whole document, such
// as a syntax error or an empty document.
const RootPath = "$"

// Sentinels matched by errors.Is.
var (
	// ErrEval: an expression failed while being evaluated; see *EvalError.
	ErrEval = errors.New("expression failed")
)

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
