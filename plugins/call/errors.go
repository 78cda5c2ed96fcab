package call

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weftworks/weft/abi"
)

// Sentinels that classify why an activity call failed. An *Error wraps
// exactly one of them, or a *GuestError, or the caller's ctx.Err(), or
// one of the runtime's own errors about the version rather than the call
// (plugins.ErrNotFound, plugins.ErrClosed, plugins.ErrInvalid).
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
	// ErrNotGranted: the guest asked for an HTTP host or a secret not
	// granted to its plugin; see *GrantError.
	ErrNotGranted = errors.New(abi.CodeNotGranted)
	// ErrSecret: a granted secret's reference did not resolve on this node
	// (an unset variable, a missing file). Another node may resolve it.
	ErrSecret = errors.New("secret unavailable")
	// ErrDiverged: a replayed guest asked the host something other than
	// what its tape holds (Call.Replay). The error also matches the
	// *tape.Divergence that names the first differing call (errors.As),
	// and tape.ErrTruncated when the guest went past the end of a tape
	// cut at its size cap.
	ErrDiverged = errors.New("replay diverged from the tape")
)

// Error is the error of a failed call: it names the call and wraps the
// reason, which errors.Is matches against the sentinels above and
// errors.As against *GuestError.
type Error struct {
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
func (e *Error) Error() string {
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
func (e *Error) Unwrap() error { return e.Err }

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

// GrantError says what a guest asked for that its plugin was not granted,
// and how an operator grants it.
type GrantError struct {
	Plugin string
	// What is "host" or "secret".
	What string
	// Name is the URL's scheme://host:port or the secret's name.
	Name string
	// Reason details a refused host: the address it resolved to, or why
	// the URL can never be granted. Empty for a secret.
	Reason string
	// Grant is the command that grants it, when one would.
	Grant string
}

// Error implements error.
func (e *GrantError) Error() string {
	s := fmt.Sprintf("%s: %s %s is not granted to plugin %s", abi.CodeNotGranted, e.What, e.Name, e.Plugin)
	if e.Reason != "" {
		s += ": " + e.Reason
	}
	if e.Grant != "" {
		s += "; to grant it: " + e.Grant
	}
	return s
}

// Unwrap returns ErrNotGranted.
func (e *GrantError) Unwrap() error { return ErrNotGranted }
