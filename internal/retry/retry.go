// Package retry decides what happens after an activity attempt fails: try
// again after a delay, or give up. It is a deterministic core: the decision
// depends only on the step's policy, the failure, the attempt number, the
// times it is given and a random source for jitter, so the runner can replay
// it and tests can script it with a fake clock.
//
// # Decisions
//
//   - A failure is retried only when it is retryable (see Cause), its code
//     is not in the policy's NonRetryable list, attempts remain
//     (MaxAttempts counts the first attempt), and the next attempt would
//     start before the step's schedule-to-close deadline, if it has one.
//   - The delay before retry n (n = 1 after the first attempt) is
//     InitialInterval × Backoff^(n-1), capped at MaxInterval. With jitter it
//     is drawn uniformly from [delay/2, delay]: jitter spreads retries of
//     many instances that failed together, and never waits longer than the
//     policy says.
//   - Timeouts, heartbeat timeouts, traps and limit breaches are retryable:
//     they are as often caused by the moment (a slow dependency, a busy
//     host) as by the input, and MaxAttempts bounds them. ABI violations and
//     unknown activities are not: the same plugin version fails the same
//     way, and neither are requests for what is not granted. Cancellation
//     is never retried.
//
// The package knows failure kinds, not the errors of the plugin runtime:
// internal/retry/classify turns those into Causes at the edge, so that this
// package and the runner link neither wazero nor the runtime.
package retry

import (
	"math"
	"slices"
	"time"

	"github.com/weftworks/weft/internal/definition"
)

// Kind classifies why an attempt failed.
type Kind string

// Failure kinds.
const (
	// KindActivity: the activity ran and reported a failure (a guest error).
	KindActivity Kind = "activity"
	// KindTimeout: the attempt passed its start-to-close timeout.
	KindTimeout Kind = "timeout"
	// KindHeartbeatTimeout: no heartbeat arrived within heartbeat_timeout.
	KindHeartbeatTimeout Kind = "heartbeat_timeout"
	// KindTrap: the guest trapped, panicked or exited.
	KindTrap Kind = "trap"
	// KindLimit: the guest exceeded a memory, output or request limit.
	KindLimit Kind = "limit"
	// KindProtocol: the guest broke the ABI, or its output is not JSON.
	KindProtocol Kind = "protocol"
	// KindUnknownActivity: the pinned plugin version has no such activity.
	KindUnknownActivity Kind = "unknown_activity"
	// KindCancelled: the attempt was cancelled.
	KindCancelled Kind = "cancelled"
	// KindNotGranted: the guest asked for an HTTP host or a secret its
	// plugin is not granted. Not retried: the next attempt would be refused
	// the same way until an operator grants it.
	KindNotGranted Kind = "not_granted"
	// KindHost: the host could not run the attempt (plugin missing from the
	// blob store, runtime closed); retried, since another node or a later
	// moment may succeed.
	KindHost Kind = "host"
)

// Cause is why an attempt failed, as the policy sees it: what Decide
// decides on. It is neither the instance's failure (weft.Failure, which is
// kept and shown) nor the plugin's wire form (abi.Failure): it classifies,
// and holds no message.
type Cause struct {
	Kind Kind
	// Code is the guest's failure code for KindActivity, and the kind's
	// name otherwise.
	Code string
	// Retryable is what the guest said for KindActivity; for other kinds
	// classify.Cause (internal/retry/classify) or Of sets it from the kind.
	Retryable bool
}

// Of returns the Cause of a kind other than KindActivity, with the
// retryability the package's rules give it.
func Of(kind Kind) Cause {
	switch kind {
	case KindProtocol, KindUnknownActivity, KindCancelled, KindNotGranted:
		return Cause{Kind: kind, Code: string(kind)}
	}
	return Cause{Kind: kind, Code: string(kind), Retryable: true}
}

// Decision is what to do after a failed attempt.
type Decision struct {
	// Retry is true when another attempt should run after Delay.
	Retry bool
	Delay time.Duration
	// Reason says why not, when Retry is false: "not retryable",
	// "non_retryable code", "attempts exhausted" or "schedule_to_close".
	Reason string
}

// Reasons for giving up.
const (
	ReasonNotRetryable     = "not retryable"
	ReasonNonRetryableCode = "non_retryable code"
	ReasonExhausted        = "attempts exhausted"
	ReasonScheduleToClose  = "schedule_to_close"
)

// Attempt describes the attempt that failed.
type Attempt struct {
	// Number counts from 1.
	Number int
	// Failed is when it failed.
	Failed time.Time
	// FirstScheduled is when the step's first attempt was scheduled; with
	// ScheduleToClose it bounds all attempts. Zero ScheduleToClose means
	// unbounded.
	FirstScheduled  time.Time
	ScheduleToClose time.Duration
}

// Decide returns what to do after attempt a failed for cause c under
// policy p.
// rnd returns a float in [0, 1) and is called only when p.Jitter is set; pass
// a source seeded per instance and step to keep the decision replayable.
func Decide(p definition.Retry, a Attempt, c Cause, rnd func() float64) Decision {
	switch {
	case !c.Retryable:
		return Decision{Reason: ReasonNotRetryable}
	case slices.Contains(p.NonRetryable, c.Code):
		return Decision{Reason: ReasonNonRetryableCode}
	case a.Number >= p.MaxAttempts:
		return Decision{Reason: ReasonExhausted}
	}
	d := Delay(p, a.Number, rnd)
	if a.ScheduleToClose > 0 && !a.Failed.Add(d).Before(a.FirstScheduled.Add(a.ScheduleToClose)) {
		return Decision{Reason: ReasonScheduleToClose}
	}
	return Decision{Retry: true, Delay: d}
}

// Delay returns the wait before retry n (n ≥ 1: the first retry follows
// attempt 1).
func Delay(p definition.Retry, n int, rnd func() float64) time.Duration {
	if n < 1 {
		n = 1
	}
	d := float64(p.InitialInterval) * math.Pow(p.Backoff, float64(n-1))
	if max := float64(p.MaxInterval); p.MaxInterval > 0 && d > max {
		d = max
	}
	if d > math.MaxInt64/2 || math.IsInf(d, 0) || math.IsNaN(d) {
		d = math.MaxInt64 / 2
	}
	if p.Jitter && rnd != nil {
		d = d/2 + d/2*rnd()
	}
	return time.Duration(d)
}
