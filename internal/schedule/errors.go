package schedule

import (
	"fmt"

	"github.com/weftworks/weft/host/weft"
)

// problems collects the problems of a document or an operation, each with
// its path; err makes them the *weft.ScheduleError that names them all.
type problems []weft.Problem

// add records a problem at path.
func (ps *problems) add(path, format string, args ...any) {
	*ps = append(*ps, weft.Problem{Path: path, Message: fmt.Sprintf(format, args...)})
}

// err returns the problems as a *weft.ScheduleError (matching
// weft.ErrInvalid), or nil when there is none.
func (ps problems) err() error {
	if len(ps) == 0 {
		return nil
	}
	return &weft.ScheduleError{Problems: ps}
}
