// Package classify turns the errors of the plugin runtime
// (plugins.Runtime.Invoke) into the retry policy's Causes. It is the edge
// between the runtime and the deterministic core: host/retry and
// host/runner know failure kinds, not the runtime's errors, so that they
// link neither wazero nor the runtime (TestCoreImportsNoIO).
package classify

import (
	"errors"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/retry"
	"github.com/weftworks/weft/plugins"
)

// Cause returns the retry.Cause of an error from
// plugins.Runtime.Invoke: the guest's own failure (its code and
// retryability) for a *plugins.GuestError, the kind of the runtime's
// sentinel the error wraps otherwise, and retry.KindHost for any other
// error.
func Cause(err error) retry.Cause {
	var ge *plugins.GuestError
	if errors.As(err, &ge) {
		if ge.Code == abi.CodeCancelled {
			return retry.Cause{Kind: retry.KindCancelled, Code: ge.Code}
		}
		return retry.Cause{Kind: retry.KindActivity, Code: ge.Code, Retryable: ge.Retryable}
	}
	kind := retry.KindHost
	switch {
	case errors.Is(err, plugins.ErrCancelled):
		kind = retry.KindCancelled
	case errors.Is(err, plugins.ErrTimeout):
		kind = retry.KindTimeout
	case errors.Is(err, plugins.ErrTrap):
		kind = retry.KindTrap
	case errors.Is(err, plugins.ErrLimit):
		kind = retry.KindLimit
	case errors.Is(err, plugins.ErrProtocol):
		kind = retry.KindProtocol
	case errors.Is(err, plugins.ErrUnknownActivity):
		kind = retry.KindUnknownActivity
	case errors.Is(err, plugins.ErrNotGranted):
		kind = retry.KindNotGranted
	}
	return retry.Of(kind)
}
