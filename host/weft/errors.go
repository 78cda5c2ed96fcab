package weft

import (
	"errors"
	"fmt"
)

// ErrFinished is what an operation that needs an unfinished instance (a
// cancel) answers for one that completed, failed or was cancelled: the API
// maps it to 409 Conflict.
var ErrFinished = errors.New("instance finished")

// FinishedError says which instance had finished already, and how. It
// matches ErrFinished.
type FinishedError struct {
	ID     string
	Status Status
}

// Error says "instance "ID" is STATUS already".
func (e *FinishedError) Error() string {
	return fmt.Sprintf("instance %q is %s already", e.ID, e.Status)
}

// Is reports whether target is ErrFinished.
func (e *FinishedError) Is(target error) bool { return target == ErrFinished }
