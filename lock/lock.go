package lock

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinels that classify lock errors; match them with errors.Is.
var (
	// ErrLost: the lease is no longer held, because it expired, another
	// holder took the key after it expired, or it was released. Returned by
	// [Lease.Extend]; the holder must stop writing under the lease.
	ErrLost = errors.New("lock lease lost")
	// ErrTransient: the lock's backend could not be reached. Acquire and
	// TryAcquire return it, wrapped with the cause, once the retry policy
	// is exhausted; Extend returns it at once.
	ErrTransient = errors.New("lock backend unavailable")
)

// Transient wraps err so that it matches [ErrTransient] and still matches
// err. Implementations use it for backend errors that a retry may cure. It
// returns nil for a nil err.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%w: %w", ErrTransient, err)
}

// Locker hands out leases on keys. Implementations are safe for concurrent
// use; the conformance suite lock/locktest states their contract as tests.
type Locker interface {
	// Acquire takes the lock on key for ttl, waiting while another lease
	// holds it: until that lease is released or expires, or until ctx ends.
	//
	// # Errors
	//
	//   - ctx.Err() when ctx ends first (also when it had already ended:
	//     a done ctx never acquires).
	//   - An error wrapping [ErrTransient] when the backend stayed
	//     unreachable through the [RetryPolicy].
	//   - A plain error for an empty key or a ttl that is not positive.
	Acquire(ctx context.Context, key string, ttl time.Duration) (Lease, error)

	// TryAcquire takes the lock on key for ttl if no lease holds it, and
	// otherwise returns ok=false at once with a nil error. It retries
	// transient backend errors like Acquire, and returns the same errors.
	TryAcquire(ctx context.Context, key string, ttl time.Duration) (lease Lease, ok bool, err error)
}

// Lease is one acquisition of a key. Its methods are safe for concurrent
// use.
type Lease interface {
	// Key returns the key the lease is on.
	Key() string

	// Token returns the fencing token: greater than the token of every
	// earlier lease on the same key, from any Locker sharing the backend.
	// Never zero.
	Token() uint64

	// Expiry returns when the lease ends unless extended, by the clock the
	// Locker uses, as last known to this lease.
	Expiry() time.Time

	// Extend moves the expiry to ttl from now. It returns an error wrapping
	// [ErrLost] when the lease already expired, was taken or was released
	// (it is never revived), an error wrapping [ErrTransient] when the
	// backend could not be reached (the lease may still be held until
	// Expiry), ctx.Err() when ctx is done, and a plain error for a ttl that
	// is not positive.
	Extend(ctx context.Context, ttl time.Duration) error

	// Release gives the lock up, so that the next acquirer gets it at once.
	// It never fails from the caller's view: releasing a lease that expired
	// or was already released does nothing, and a failure to reach the
	// backend is logged, because the TTL ends the lease anyway.
	// Release does its work even when ctx is already done, since a lease is
	// most often released on the way out of a cancelled operation;
	// implementations bound the call by their own timeout.
	Release(ctx context.Context)
}

// CheckArgs reports an empty key or a ttl that is not positive, with the
// message every implementation uses.
func CheckArgs(key string, ttl time.Duration) error {
	if key == "" {
		return errors.New("lock: key must not be empty")
	}
	if ttl <= 0 {
		return fmt.Errorf("lock: ttl must be positive, got %s", ttl)
	}
	return nil
}

// BatchExtender is implemented by Lockers that extend many of their leases
// in one round trip per backend server. The heartbeat scheduler extends a
// tick's batch of instance locks through it (see ExtendAll).
type BatchExtender interface {
	// ExtendLeases extends each lease as its Extend would, and returns
	// one error per lease, in order (nil for those extended). Leases this
	// Locker did not hand out are extended one by one.
	ExtendLeases(ctx context.Context, leases []Lease, ttl time.Duration) []error
}

// ExtendAll extends leases of l: in one batch when l is a BatchExtender,
// otherwise one Extend after the other. It returns one error per lease.
func ExtendAll(ctx context.Context, l Locker, leases []Lease, ttl time.Duration) []error {
	if be, ok := l.(BatchExtender); ok {
		return be.ExtendLeases(ctx, leases, ttl)
	}
	errs := make([]error, len(leases))
	for i, ls := range leases {
		errs[i] = ls.Extend(ctx, ttl)
	}
	return errs
}
