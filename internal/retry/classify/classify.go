// Package classify turns the errors of the plugin runtime
// (plugins.Runtime.Invoke) into the retry policy's Causes. It is the edge
// between the runtime and the deterministic core: internal/retry and
// internal/runner know failure kinds, not the runtime's errors, so that they
// link neither wazero nor the runtime (TestCoreImportsNoIO). It reads the
// errors through plugins/call, which declares them, so that it links no
// wazero either, nor does the engine that calls it (TestEngineLinksNoWazero).
package classify

import (
	"errors"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/retry"
	"github.com/weftworks/weft/plugins/call"
)

// Cause returns the retry.Cause of an error from
// plugins.Runtime.Invoke: the guest's own failure (its code and
// retryability) for a *call.GuestError, the kind of the call's
// sentinel the error wraps otherwise, and retry.KindHost for any other
// error.
func Cause(err error) retry.Cause {
	var ge *call.GuestError
	if errors.As(err, &ge) {
		if ge.Code == abi.CodeCancelled {
			return retry.Cause{Kind: retry.KindCancelled, Code: ge.Code}
		}
		return retry.Cause{Kind: retry.KindActivity, Code: ge.Code, Retryable: ge.Retryable}
	}
	kind := retry.KindHost
	switch {
	case errors.Is(err, call.ErrCancelled):
		kind = retry.KindCancelled
	case errors.Is(err, call.ErrTimeout):
		kind = retry.KindTimeout
	case errors.Is(err, call.ErrTrap):
		kind = retry.KindTrap
	case errors.Is(err, call.ErrLimit):
		kind = retry.KindLimit
	case errors.Is(err, call.ErrProtocol):
		kind = retry.KindProtocol
	case errors.Is(err, call.ErrUnknownActivity):
		kind = retry.KindUnknownActivity
	case errors.Is(err, call.ErrNotGranted):
		kind = retry.KindNotGranted
	}
	return retry.Of(kind)
}
