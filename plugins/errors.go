package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/weftworks/weft/abi"
)

// Sentinels that classify why an activity call failed. A *CallError wraps
// exactly one of them, or a *GuestError, or the caller's ctx.Err().
var (
	// ErrTimeout: the call's deadline passed and the guest was stopped.
	ErrTimeout = errors.New("deadline exceeded")
	// ErrCancelled: the activity was cancelled, either by returning the
	// cancelled failure or by being stopped after the grace period.
	ErrCancelled = errors.New("activity cancelled")
	// ErrTrap: the guest trapped, exited or otherwise stopped abnormally.
	ErrTrap = errors.New("guest trapped")
	// ErrLimit: the guest exceeded a memory, output or request size limit.
	ErrLimit = errors.New("limit exceeded")
	// ErrProtocol: the guest broke the ABI (bad pointer, bad status, garbage
	// output).
	ErrProtocol = errors.New("ABI violation")
	// ErrUnknownActivity: the plugin's manifest has no such activity.
	ErrUnknownActivity = errors.New("unknown activity")
	// ErrNotFound: no plugin version with that hash is loaded or stored.
	ErrNotFound = errors.New("plugin version not found")
	// ErrClosed: the runtime was closed.
	ErrClosed = errors.New("plugin runtime closed")
	// ErrInvalid: a module failed validation; see *ValidationError.
	ErrInvalid = errors.New("invalid plugin")
)

// CallError is returned by Runtime.Invoke. It names the call and wraps the
// reason, which errors.Is matches against the sentinels above and errors.As
// against *GuestError.
type CallError struct {
	Version  string
	Activity string
	// Err is the reason: a sentinel wrapped with detail, a *GuestError, or
	// the caller's context error.
	Err error
	// Stderr is the tail of what the guest wrote to stderr during the call,
	// kept for failures other than guest errors.
	Stderr string
}

// Error implements error.
func (e *CallError) Error() string {
	v := e.Version
	if len(v) > 12 {
		v = v[:12]
	}
	s := fmt.Sprintf("plugin %s activity %q: %v", v, e.Activity, e.Err)
	if e.Stderr != "" {
		s += "\nguest stderr:\n" + e.Stderr
	}
	return s
}

// Unwrap returns the reason.
func (e *CallError) Unwrap() error { return e.Err }

// GuestError is a failure the guest reported through the ABI: the activity
// ran and said it failed.
type GuestError struct {
	Code      string          `json:"code"`
	Message   string          `json:"message,omitempty"`
	Retryable bool            `json:"retryable"`
	Details   json.RawMessage `json:"details,omitempty"`
}

// Error implements error.
func (e *GuestError) Error() string {
	if e.Message == "" {
		return "activity failed: " + e.Code
	}
	return "activity failed: " + e.Code + ": " + e.Message
}

// Is makes a guest-reported cancellation match ErrCancelled.
func (e *GuestError) Is(target error) bool {
	return target == ErrCancelled && e.Code == abi.CodeCancelled
}

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
