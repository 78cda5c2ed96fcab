package metrics

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/weftworks/weft/lock"
)

// Locker returns inner decorated to count acquisitions by result, time
// them, and count lease extensions by result. Keys are reported by kind,
// the part before the first ':' ("workflow-instance" for every instance
// lock).
func Locker(m *Metrics, inner lock.Locker) lock.Locker {
	return &locker{m: m, inner: inner}
}

type locker struct {
	m     *Metrics
	inner lock.Locker
}

// keyKind reduces a key to a bounded label value.
func keyKind(key string) string {
	if i := strings.IndexByte(key, ':'); i >= 0 {
		return key[:i]
	}
	return key
}

func acquireResult(err error) string {
	switch {
	case err == nil:
		return "acquired"
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "cancelled"
	default:
		return "error"
	}
}

// Acquire implements lock.Locker.
func (l *locker) Acquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, error) {
	kind := keyKind(key)
	start := time.Now()
	ls, err := l.inner.Acquire(ctx, key, ttl)
	l.m.lockWait.WithLabelValues(kind, "acquire").Observe(time.Since(start).Seconds())
	l.m.lockAcquire.WithLabelValues(kind, "acquire", acquireResult(err)).Inc()
	if err != nil {
		return nil, err
	}
	return &lease{Lease: ls, m: l.m, kind: kind}, nil
}

// TryAcquire implements lock.Locker.
func (l *locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, bool, error) {
	kind := keyKind(key)
	start := time.Now()
	ls, ok, err := l.inner.TryAcquire(ctx, key, ttl)
	l.m.lockWait.WithLabelValues(kind, "try").Observe(time.Since(start).Seconds())
	result := acquireResult(err)
	if err == nil && !ok {
		result = "busy"
	}
	l.m.lockAcquire.WithLabelValues(kind, "try", result).Inc()
	if err != nil || !ok {
		return ls, ok, err
	}
	return &lease{Lease: ls, m: l.m, kind: kind}, true, nil
}

// lease counts the extensions of an acquired lease.
type lease struct {
	lock.Lease
	m    *Metrics
	kind string
}

// Extend implements lock.Lease.
func (l *lease) Extend(ctx context.Context, ttl time.Duration) error {
	err := l.Lease.Extend(ctx, ttl)
	l.count(err)
	return err
}

func (l *lease) count(err error) {
	result := "extended"
	switch {
	case err == nil:
	case errors.Is(err, lock.ErrLost):
		result = "lost"
	default:
		result = "error"
	}
	l.m.lockExtend.WithLabelValues(l.kind, result).Inc()
}

// ExtendLeases implements lock.BatchExtender, so that decorating a locker
// keeps its batched extensions.
func (l *locker) ExtendLeases(ctx context.Context, leases []lock.Lease, ttl time.Duration) []error {
	inner := make([]lock.Lease, len(leases))
	for i, ls := range leases {
		inner[i] = ls
		if d, ok := ls.(*lease); ok {
			inner[i] = d.Lease
		}
	}
	errs := lock.ExtendAll(ctx, l.inner, inner, ttl)
	for i, ls := range leases {
		if d, ok := ls.(*lease); ok {
			d.count(errs[i])
		}
	}
	return errs
}
