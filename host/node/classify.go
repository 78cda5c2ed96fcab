package node

import "github.com/weftworks/weft/internal/retry/classify"

// CallFailure is how the engine takes an activity call's error: its kind
// (activity when the guest reported it; timeout, trap, limit, protocol,
// cancelled, unknown_activity, not_granted or host when the host saw it),
// its code, and whether the step's retry policy may try again.
type CallFailure struct {
	Kind      string
	Code      string
	Retryable bool
}

// ClassifyCall says how the engine would take err, the error of an
// activity call (plugins.Runtime.Invoke), so that a tool running a plugin
// outside a host (`weft plugin call`) reports it as a run would.
func ClassifyCall(err error) CallFailure {
	c := classify.Cause(err)
	return CallFailure{Kind: string(c.Kind), Code: c.Code, Retryable: c.Retryable}
}
