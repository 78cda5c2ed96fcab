package batch

import (
	"fmt"

	"github.com/weftworks/weft/host/weft"
)

// maxProblems bounds the problems an Error lists, so that a list of ten
// thousand bad ids answers in a readable size; the last one says how many
// more there were.
const maxProblems = 50

// problems collects the problems of a document, each with its path.
type problems []weft.Problem

// add records a problem at path.
func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, weft.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// err returns the problems as a *weft.BatchError, at most maxProblems of them, or
// nil when there is none.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	if len(ps) > maxProblems {
		more := len(ps) - (maxProblems - 1)
		ps = append(ps[:maxProblems-1:maxProblems-1], weft.Problem{Message: fmt.Sprintf("and %d more problems", more)})
	}
	return &weft.BatchError{Problems: ps}
}
