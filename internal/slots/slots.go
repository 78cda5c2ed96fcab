package slots

import (
	"slices"
	"time"
)

// Outcome is what an operation's own step found for its caller's id.
type Outcome string

// The outcomes. Expire, which has no caller, has none (the empty Outcome).
const (
	// Granted (Acquire): the id holds a slot, until Decision.Expiry —
	// granted now, promoted by this call's sweep, or held already (its
	// lease then moves to now+Lease).
	Granted Outcome = "granted"
	// Waiting (Acquire, Renew): the id is in the line. For Acquire, it
	// joined it now or was in it already; for Renew, it had no lease to
	// renew (it may still be promoted by the same call: see
	// Decision.Promoted).
	Waiting Outcome = "waiting"
	// Refused (Acquire, CancelNewest): the id may neither hold nor wait;
	// the engine cancels it. The State is as the sweep left it.
	Refused Outcome = "refused"
	// Released (Release): the id held a slot and no longer does.
	Released Outcome = "released"
	// Left (Release): the id was in the line and left it.
	Left Outcome = "left"
	// Renewed (Renew): the id holds its slot until Decision.Expiry.
	Renewed Outcome = "renewed"
	// Unknown (Release, Renew): the id neither holds nor waits — never
	// did, released already, or its lease expired at or before now (then
	// it is in Decision.Expired as well). For Release it is a no-op; for
	// Renew it means the slot is lost: the engine must stop the work that
	// thought it held one, or Acquire again.
	Unknown Outcome = "unknown"
)

// Decision is what one operation did, for the engine to act on.
type Decision struct {
	// Outcome is what the operation's own step found for its caller.
	Outcome Outcome `json:"outcome,omitempty"`
	// Expiry is the caller's lease expiry when the Outcome is Granted or
	// Renewed.
	Expiry time.Time `json:"expiry,omitzero"`
	// Expired lists the holders whose lease had ended at now, which this
	// call's sweep removed, in grant order. Their slots went to the next
	// waiters.
	Expired []string `json:"expired,omitempty"`
	// Promoted lists the waiters that now hold a slot, in line order, with
	// their lease: the engine wakes each (and Releases at once one whose
	// instance or attempt no longer exists). An Acquire's caller promoted
	// by its own sweep is not listed: its Outcome is Granted.
	Promoted []Grant `json:"promoted,omitempty"`
	// Cancel lists whom a CancelOldest acquisition displaced, oldest
	// first: the engine cancels each. A waiter listed has left the line
	// already; a holder listed still holds its slot, flagged Cancelling,
	// until it Releases it (or its lease expires).
	Cancel []Cancellation `json:"cancel,omitempty"`
}

// Grant is a slot given to a waiter by promotion.
type Grant struct {
	// ID is the waiter that now holds a slot.
	ID string `json:"id"`
	// Expiry is when its lease ends unless renewed.
	Expiry time.Time `json:"expiry"`
}

// Cancellation is one id that the engine must cancel.
type Cancellation struct {
	// ID is the holder or waiter to cancel.
	ID string `json:"id"`
	// Holding says it holds a slot, which it keeps until it Releases it;
	// false for a waiter, which has left the line.
	Holding bool `json:"holding,omitempty"`
}

// Acquire asks for a slot of st's key for id, at now. After the sweep
// (package documentation, "The sweep"):
//   - an id that holds a slot has it again, its lease moved to now+Lease
//     (Granted); an id in the line stays where it is (Waiting): acquiring
//     twice is harmless, whatever the policy;
//   - a newcomer gets a slot when fewer than Limit hold one (after the
//     sweep, nobody waits then) (Granted);
//   - otherwise p.Policy decides: Queue appends it to the line (Waiting);
//     CancelNewest refuses it (Refused); CancelOldest appends it to the
//     line (Waiting) and lists for cancellation the oldest members not
//     being cancelled already beyond the newest Limit of them and the
//     newcomer (Decision.Cancel).
//
// # Errors
//
// An *Error wrapping ErrID, ErrLimit, ErrLease or ErrPolicy; st is then
// returned as it was. st itself is never modified.
func Acquire(st State, id string, p Params, now time.Time) (State, Decision, error) {
	if err := check("acquire", st.Key, id, true, p); err != nil {
		return st, Decision{}, err
	}
	o := begin(st, p, now)
	o.expire()
	o.promote(id)
	if i := o.s.holder(id); i >= 0 {
		o.s.Holders[i].Expiry = o.lease()
		o.d.Outcome, o.d.Expiry = Granted, o.lease()
	} else if o.s.waiter(id) >= 0 {
		o.d.Outcome = Waiting
	} else if len(o.s.Holders) < p.Limit {
		// The sweep promoted while holders < Limit, so the line is empty.
		o.s.Holders = append(o.s.Holders, Holder{ID: id, Since: now, Expiry: o.lease()})
		o.d.Outcome, o.d.Expiry = Granted, o.lease()
	} else {
		switch p.Policy.orDefault() {
		case Queue:
			o.s.Waiters = append(o.s.Waiters, Waiter{ID: id, Since: now})
			o.d.Outcome = Waiting
		case CancelNewest:
			o.d.Outcome = Refused
		case CancelOldest:
			o.cancelOldest(id)
			o.d.Outcome = Waiting
		}
	}
	return o.end()
}

// Release gives up id's slot, or its place in the line, at now. After the
// expiry step of the sweep, a holder's slot is freed (Released), a waiter
// leaves the line (Left), and an id that is neither changes nothing
// (Unknown); then waiters are promoted while fewer than Limit hold a
// slot.
//
// # Errors
//
// As Acquire.
func Release(st State, id string, p Params, now time.Time) (State, Decision, error) {
	if err := check("release", st.Key, id, true, p); err != nil {
		return st, Decision{}, err
	}
	o := begin(st, p, now)
	o.expire()
	if i := o.s.holder(id); i >= 0 {
		o.s.Holders = slices.Delete(o.s.Holders, i, i+1)
		o.d.Outcome = Released
	} else if i := o.s.waiter(id); i >= 0 {
		o.s.Waiters = slices.Delete(o.s.Waiters, i, i+1)
		o.d.Outcome = Left
	} else {
		o.d.Outcome = Unknown
	}
	o.promote("")
	return o.end()
}

// Renew moves id's lease to now+Lease (the engine's heartbeat), after the
// expiry step of the sweep: a lease that ended at or before now is not
// renewed, whether or not an earlier call removed it, so that a late
// renewal never revives a slot. The Outcome is Renewed, Waiting (the id is
// in the line and has no lease) or Unknown (the slot is lost); then
// waiters are promoted while fewer than Limit hold a slot.
//
// # Errors
//
// As Acquire.
func Renew(st State, id string, p Params, now time.Time) (State, Decision, error) {
	if err := check("renew", st.Key, id, true, p); err != nil {
		return st, Decision{}, err
	}
	o := begin(st, p, now)
	o.expire()
	if i := o.s.holder(id); i >= 0 {
		o.s.Holders[i].Expiry = o.lease()
		o.d.Outcome, o.d.Expiry = Renewed, o.lease()
	} else if o.s.waiter(id) >= 0 {
		o.d.Outcome = Waiting
	} else {
		o.d.Outcome = Unknown
	}
	o.promote("")
	return o.end()
}

// Expire is the sweep alone: the holders whose lease ended at or before
// now lose their slot (a node died holding it), and waiters are promoted
// while fewer than Limit hold a slot. Every other operation begins with
// it; the engine calls Expire for the keys no call touches when their
// Stats.NextExpiry has come.
//
// # Errors
//
// An *Error wrapping ErrLimit, ErrLease or ErrPolicy.
func Expire(st State, p Params, now time.Time) (State, Decision, error) {
	if err := check("expire", st.Key, "", false, p); err != nil {
		return st, Decision{}, err
	}
	o := begin(st, p, now)
	o.expire()
	o.promote("")
	return o.end()
}

// op is one operation under way on a copy of the caller's State.
type op struct {
	s   State
	d   Decision
	p   Params
	now time.Time
}

// begin starts an operation on a copy of st, so that st is never
// modified.
func begin(st State, p Params, now time.Time) *op {
	return &op{s: st.clone(), p: p, now: now}
}

// lease is the expiry of a lease granted or renewed now.
func (o *op) lease() time.Time { return o.now.Add(o.p.Lease) }

// expire removes the holders whose lease ended at or before now: a lease
// until 10s is held at 9.999s and lost at 10s, never earlier.
func (o *op) expire() {
	kept := o.s.Holders[:0]
	for _, h := range o.s.Holders {
		if h.Expiry.After(o.now) {
			kept = append(kept, h)
		} else {
			o.d.Expired = append(o.d.Expired, h.ID)
		}
	}
	o.s.Holders = kept
}

// promote gives slots to the waiters, first in line first, while fewer
// than Limit hold one. The caller (of Acquire) promoted is not listed in
// the Decision: its Outcome says it.
func (o *op) promote(caller string) {
	n := 0
	for n < len(o.s.Waiters) && len(o.s.Holders) < o.p.Limit {
		w := o.s.Waiters[n]
		n++
		o.s.Holders = append(o.s.Holders, Holder{ID: w.ID, Since: o.now, Expiry: o.lease()})
		if w.ID != caller {
			o.d.Promoted = append(o.d.Promoted, Grant{ID: w.ID, Expiry: o.lease()})
		}
	}
	o.s.Waiters = o.s.Waiters[n:]
}

// cancelOldest applies CancelOldest to the newcomer id, which could not be
// granted a slot: it joins the end of the line, and the members not being
// cancelled already, oldest first — the holders in grant order, then the
// waiters in line order: with a FIFO line that is the order they arrived
// in — are cancelled until the newest Limit of them, the newcomer
// included, remain. Holders are flagged and keep their slot; waiters
// leave the line.
func (o *op) cancelOldest(id string) {
	live := len(o.s.Waiters) + 1
	for _, h := range o.s.Holders {
		if !h.Cancelling {
			live++
		}
	}
	excess := max(live-o.p.Limit, 0)
	for i := range o.s.Holders {
		if excess == 0 {
			break
		}
		if h := &o.s.Holders[i]; !h.Cancelling {
			h.Cancelling = true
			o.d.Cancel = append(o.d.Cancel, Cancellation{ID: h.ID, Holding: true})
			excess--
		}
	}
	// excess ≤ live−1, the members other than the newcomer: the line
	// holds enough.
	n := min(excess, len(o.s.Waiters))
	for _, w := range o.s.Waiters[:n] {
		o.d.Cancel = append(o.d.Cancel, Cancellation{ID: w.ID})
	}
	o.s.Waiters = append(o.s.Waiters[n:], Waiter{ID: id, Since: o.now})
}

// end returns the operation's State, with empty lists as nil so that two
// equal States compare equal, and its Decision.
func (o *op) end() (State, Decision, error) {
	if len(o.s.Holders) == 0 {
		o.s.Holders = nil
	}
	if len(o.s.Waiters) == 0 {
		o.s.Waiters = nil
	}
	return o.s, o.d, nil
}
