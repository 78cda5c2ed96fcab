package plugins

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/tape"
)

// The runtime's own errors, about a version rather than one call; the
// reasons a call fails are call's sentinels (call.ErrTimeout, …). Invoke
// wraps these in a *call.Error too.
var (
	// ErrNotFound: no plugin version with that hash is loaded or stored.
	ErrNotFound = errors.New("plugin version not found")
	// ErrClosed: the runtime was closed.
	ErrClosed = errors.New("plugin runtime closed")
	// ErrInvalid: a module failed validation; see *ValidationError.
	ErrInvalid = errors.New("invalid plugin")
)

// maskedError is an error of a call whose message quoted a secret's value
// (the host's errors quote guest bytes): its message with the value
// masked. It matches the sentinels the original matched, and keeps
// nothing else of it, so that no caller can unwrap the value.
type maskedError struct {
	msg   string
	kinds []error
}

func newMaskedError(msg string, err error) *maskedError {
	e := &maskedError{msg: msg}
	for _, s := range []error{call.ErrTimeout, call.ErrCancelled, call.ErrTrap, call.ErrLimit, call.ErrProtocol, call.ErrUnknownActivity,
		ErrNotFound, ErrClosed, call.ErrNotGranted, call.ErrSecret, context.Canceled, context.DeadlineExceeded,
		call.ErrDiverged, tape.ErrTruncated, tape.ErrMalformed} {
		if errors.Is(err, s) {
			e.kinds = append(e.kinds, s)
		}
	}
	// A divergence holds only Asks, which the runtime masks before it
	// records or compares them: kept, so that a caller finds the first
	// differing call.
	var d *tape.Divergence
	if errors.As(err, &d) {
		e.kinds = append(e.kinds, d)
	}
	return e
}

// Error implements error.
func (e *maskedError) Error() string { return e.msg }

// Unwrap returns the sentinels the original error matched.
func (e *maskedError) Unwrap() []error { return e.kinds }

// ValidationError lists every reason a module was refused. It matches
// ErrInvalid.
type ValidationError struct {
	Problems []string
}

// Error implements error.
func (e *ValidationError) Error() string {
	return "invalid plugin: " + strings.Join(e.Problems, "; ")
}

// Is makes a *ValidationError match ErrInvalid.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

func invalid(format string, args ...any) *ValidationError {
	return &ValidationError{Problems: []string{fmt.Sprintf(format, args...)}}
}
