package redislock

import (
	"context"
	"errors"
	"fmt"
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

// Extend implements lock.Lease.
func (s *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := checkArgs(s.key, ttl); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case s.sem <- struct{}{}:
		defer func() { <-s.sem }()
	case <-ctx.Done():
		return ctx.Err()
	}
	start := s.l.now()
	s.mu.Lock()
	if !s.lost && !s.ended && !start.Before(s.expiry) {
		// Past its expiry by our clock the lease is over, even if a slow
		// server has not noticed: it is never revived.
		s.lost = true
	}
	gone := s.lost || s.ended
	s.mu.Unlock()
	if gone {
		return fmt.Errorf("redislock: extend %q: %w", s.key, lock.ErrLost)
	}
	m := s.l.rs.NewMutex(s.name,
		redsync.WithExpiry(ttl),
		redsync.WithValue(s.value),
		redsync.WithDriftFactor(driftFactor),
	)
	// Bounded per server like an acquisition, so that one hung server
	// delays an Extend that the others grant by no more than that.
	ectx, cancel := context.WithTimeout(ctx, nodeTimeout(ttl))
	ok, err := m.ExtendContext(ectx)
	cancel()
	if cerr := ctx.Err(); cerr != nil {
		// The servers may or may not have extended: the old expiry stays,
		// which is the safe side.
		return cerr
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case ok:
		s.expiry = start.Add(ttl - drift(ttl))
		return nil
	case err == nil || taken(err):
		// A quorum no longer holds our value: it expired, or another
		// holder has the key.
		s.lost = true
		return fmt.Errorf("redislock: extend %q: %w", s.key, lock.ErrLost)
	default:
		return lock.Transient(fmt.Errorf("redislock: extend %q: %w", s.key, err))
	}
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
