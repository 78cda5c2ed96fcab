package slots

import (
	"fmt"
	"time"
)

// Policy says what Acquire does with a newcomer that finds every slot of
// its key taken (or someone waiting already). It is a definition's
// `concurrency.policy`; ParsePolicy reads one.
type Policy string

// The policies. The empty Policy means Queue.
const (
	// Queue: the newcomer joins the end of the line and gets a slot when
	// everyone ahead of it has had one (first come, first served within
	// the key). The default.
	Queue Policy = "queue"
	// CancelNewest: the newcomer is refused (the engine cancels it);
	// nothing else changes. For work that must not pile up.
	CancelNewest Policy = "cancel_newest"
	// CancelOldest: the newcomer waits (at the end of the line), and the
	// oldest members of the key beyond the newest Limit — counting the
	// holders and waiters not yet being cancelled, and the newcomer — are
	// cancelled: waiters leave the line at once, holders keep their slot
	// until they Release it. For work where only the latest matters
	// (cancel-in-progress).
	CancelOldest Policy = "cancel_oldest"
)

// valid reports whether p is a policy; empty is (it means Queue).
func (p Policy) valid() bool {
	switch p {
	case "", Queue, CancelNewest, CancelOldest:
		return true
	}
	return false
}

// orDefault returns p, or Queue for the empty policy.
func (p Policy) orDefault() Policy {
	if p == "" {
		return Queue
	}
	return p
}

// ParsePolicy reads a definition's policy: queue, cancel_newest or
// cancel_oldest, spelled exactly so; the empty string is Queue. Anything
// else is an error that wraps ErrPolicy and quotes what it was given, for
// the definition layer to report with its path.
func ParsePolicy(s string) (Policy, error) {
	p := Policy(s)
	if !p.valid() {
		return "", fmt.Errorf("%w: %q", ErrPolicy, s)
	}
	return p.orDefault(), nil
}

// Params are the terms in force for one call on a key: the definition's
// limit and policy, and the engine's lease. They are arguments of every
// call, not part of the State, so that a definition whose limit changes
// applies the new one from its next call: to new acquisitions and to
// promotions, never by evicting a holder.
type Params struct {
	// Limit is how many holders the key may have at once; at least 1.
	Limit int
	// Policy applies when an Acquire cannot be granted at once; empty
	// means Queue. Release, Renew and Expire check it but do not use it.
	Policy Policy
	// Lease is how long a slot is held without a renewal: a grant, a
	// promotion or a Renew at now holds the slot until now+Lease. The
	// engine renews well before (its heartbeat), so that only a node that
	// died lets a lease run out. Positive.
	Lease time.Duration
}
