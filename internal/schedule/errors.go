package schedule

import (
	"fmt"
	"strings"

	"github.com/weftworks/weft/host/weft"
)

// Problem is one reason a schedule was refused: the path of the field at
// fault (spec.cron[0], policy.overlap) and what is wrong with it.
type Problem struct {
	Path    string
	Message string
}

// Error lists every problem of a schedule, so that one answer names them
// all. It matches weft.ErrInvalid.
type Error struct {
	Problems []Problem
}

// Error implements error.
func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.Path + ": " + p.Message
	}
	return "schedule: " + strings.Join(parts, "; ")
}

// Is reports whether target is weft.ErrInvalid.
func (e *Error) Is(target error) bool { return target == weft.ErrInvalid }

// add records a problem at path.
func (e *Error) add(path, format string, args ...any) {
	e.Problems = append(e.Problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}
