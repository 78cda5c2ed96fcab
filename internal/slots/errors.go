package slots

import (
	"errors"
	"fmt"
)

// The sentinels of refused arguments. An operation wraps them in an
// *Error that names the operation, the key and the id; ParsePolicy wraps
// ErrPolicy with the policy it was given. Match them with errors.Is.
var (
	// ErrLimit: the limit is below 1. A limit of 0 would wedge the key:
	// nobody could ever hold a slot.
	ErrLimit = errors.New("the limit must be at least 1")
	// ErrID: the holder id is empty, which would make every caller the
	// same one.
	ErrID = errors.New("the id is empty")
	// ErrPolicy: the policy is none of queue, cancel_newest and
	// cancel_oldest.
	ErrPolicy = errors.New("unknown policy (want queue, cancel_newest or cancel_oldest)")
	// ErrLease: the lease is not positive: a slot granted with it would
	// be expired at the instant it was granted.
	ErrLease = errors.New("the lease must be positive")
)

// Error is an operation's refusal of its arguments: which operation, on
// which key, for which id (empty for Expire) and why (Err, which wraps
// one of the sentinels). The state is returned unchanged with it.
type Error struct {
	// Op is the operation: "acquire", "release", "renew" or "expire".
	Op string
	// Key is the State's key.
	Key string
	// ID is the caller's id; empty for Expire, and when it is the
	// problem.
	ID string
	// Err says what is wrong; errors.Is matches the sentinel it wraps.
	Err error
}

// Error names the operation, the key, the id and the problem.
func (e *Error) Error() string {
	if e.ID == "" {
		return fmt.Sprintf("slots: %s on key %q: %v", e.Op, e.Key, e.Err)
	}
	return fmt.Sprintf("slots: %s %q on key %q: %v", e.Op, e.ID, e.Key, e.Err)
}

// Unwrap returns Err, so that errors.Is matches the sentinel.
func (e *Error) Unwrap() error { return e.Err }

// check refuses the arguments of an operation: an empty id (when the
// operation takes one) and Params that are not valid.
func check(op, key, id string, withID bool, p Params) error {
	var err error
	switch {
	case withID && id == "":
		err = ErrID
	case p.Limit < 1:
		err = fmt.Errorf("%w, got %d", ErrLimit, p.Limit)
	case p.Lease <= 0:
		err = fmt.Errorf("%w, got %s", ErrLease, p.Lease)
	case !p.Policy.valid():
		err = fmt.Errorf("%w: %q", ErrPolicy, string(p.Policy))
	}
	if err != nil {
		return &Error{Op: op, Key: key, ID: id, Err: err}
	}
	return nil
}
