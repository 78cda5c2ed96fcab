package redislock

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"

	"github.com/weftworks/weft/lock"
)

// lease is one acquisition. Each operation builds its own redsync Mutex
// from the name and value (redsync's Mutex is not safe for concurrent use),
// and sem serialises Extend and Release so that the bookkeeping follows the
// order in which the servers saw them.
type lease struct {
	l     *locker
	key   string
	name  string // the mutex's Redis key
	value string // this acquisition's random mutex value
	token uint64
	sem   chan struct{} // held by one Extend or Release at a time

	mu     sync.Mutex
	expiry time.Time // last known expiry, by l.now
	lost   bool      // an Extend found the lease gone
	ended  bool      // Release was called
}

// Key implements lock.Lease.
func (s *lease) Key() string { return s.key }

// Token implements lock.Lease.
func (s *lease) Token() uint64 { return s.token }

// Expiry implements lock.Lease.
func (s *lease) Expiry() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.expiry
}

// Extend implements lock.Lease: a batch of one (see ExtendLeases), so that
// one lease and a tick's batch decide alike when a lease is lost.
func (s *lease) Extend(ctx context.Context, ttl time.Duration) error {
	return s.l.ExtendLeases(ctx, []lock.Lease{s}, ttl)[0]
}

// Release implements lock.Lease.
func (s *lease) Release(ctx context.Context) {
	s.mu.Lock()
	ended, lost := s.ended, s.lost
	s.ended = true
	s.mu.Unlock()
	if ended {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		s.l.log.Warn("lock release gave up waiting for an extend; the lease ends with its TTL",
			"key", s.key, "token", s.token, "expiry", s.Expiry())
		return
	}
	ok, err := s.l.unlock(ctx, s.key, s.value)
	var unreachable *redsync.RedisError
	switch {
	case ok:
	case lost || !errors.As(err, &unreachable):
		s.l.log.Warn("lock lease lost before release", "key", s.key, "token", s.token, "expiry", s.Expiry())
	default:
		s.l.log.Warn("lock release failed; the lease ends with its TTL",
			"key", s.key, "token", s.token, "expiry", s.Expiry(), "error", err)
	}
}
