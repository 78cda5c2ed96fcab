// Package local is the in-process [lock.Locker] of the embedded mode: one
// process, one host, no backend to reach, so it never returns
// [lock.ErrTransient] and needs no retry policy.
//
// # Notes
//
//   - Expiry is decided by the configured clock (Config.Now): a lease whose
//     expiry is not after Now is free for the next acquirer, and its own
//     Extend fails with [lock.ErrLost].
//   - A waiting Acquire wakes at once when the holder releases (every lease
//     has a channel closed on its end), at the holder's expiry by a timer,
//     and at least every 250 ms to notice clock jumps (or a fake clock being
//     advanced).
//   - Tokens come from one counter per Locker, kept at least the clock's
//     Unix microseconds, so they also increase across restarts of the
//     process (see package lock).
//   - No goroutines run in the background; expired leases nobody asks about
//     again are swept while acquiring.
package local

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/weftworks/weft/lock"
)

// Config configures the local Locker. The zero value is usable: New fills
// every unset field.
type Config struct {
	// Logger receives the locker's logs: releases of leases that had
	// already been lost. Defaults to slog.Default().
	Logger *slog.Logger

	// Now is the clock for expiries and token floors. Defaults to time.Now.
	Now func() time.Time
}

// WithDefaults returns a copy of c with every unset field set to its
// default.
func (c Config) WithDefaults() Config {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// maxWait bounds a waiter's sleep so that it notices clock jumps and fake
// clocks; releases wake it at once regardless.
const maxWait = 250 * time.Millisecond

// sweepEvery is how many grants pass between sweeps of expired entries.
const sweepEvery = 1024

// New returns an in-process Locker, safe for concurrent use. Lockers from
// different calls share nothing: one process uses one.
func New(cfg Config) lock.Locker {
	cfg = cfg.WithDefaults()
	return &locker{log: cfg.Logger, now: cfg.Now, maxWait: maxWait, held: make(map[string]*entry)}
}

type locker struct {
	log     *slog.Logger
	now     func() time.Time
	maxWait time.Duration // maxWait, or longer in tests

	mu     sync.Mutex
	held   map[string]*entry // current lease per key, possibly expired
	last   uint64            // last token handed out
	grants int               // grants since the last sweep
}

// entry is one lease's state, owned by locker.mu.
type entry struct {
	token  uint64
	expiry time.Time
	done   chan struct{} // closed when the entry leaves the map
}

// drop removes key's entry e from the map and wakes its waiters. Called
// with l.mu held, at most once per entry.
func (l *locker) drop(key string, e *entry) {
	delete(l.held, key)
	close(e.done)
}

// tryLocked grants key if it is free or its lease expired. If not, it
// returns the holder's entry. Called with l.mu held.
func (l *locker) tryLocked(key string, ttl time.Duration) (*lease, *entry) {
	now := l.now()
	if e, ok := l.held[key]; ok {
		if now.Before(e.expiry) {
			return nil, e
		}
		l.drop(key, e)
	}
	l.grants++
	if l.grants >= sweepEvery {
		l.grants = 0
		for k, e := range l.held {
			if !now.Before(e.expiry) {
				l.drop(k, e)
			}
		}
	}
	l.last = max(l.last+1, uint64(max(now.UnixMicro(), 0)))
	e := &entry{token: l.last, expiry: now.Add(ttl), done: make(chan struct{})}
	l.held[key] = e
	return &lease{l: l, key: key, token: e.token, expiry: e.expiry}, nil
}

// TryAcquire implements lock.Locker.
func (l *locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, bool, error) {
	if err := lock.CheckArgs(key, ttl); err != nil {
		return nil, false, err
	}
	if err := ctx.Err(); err != nil {
		return nil, false, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if ls, _ := l.tryLocked(key, ttl); ls != nil {
		return ls, true, nil
	}
	return nil, false, nil
}

// Acquire implements lock.Locker.
func (l *locker) Acquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, error) {
	if err := lock.CheckArgs(key, ttl); err != nil {
		return nil, err
	}
	var t *time.Timer
	defer func() {
		if t != nil {
			t.Stop()
		}
	}()
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		l.mu.Lock()
		ls, holder := l.tryLocked(key, ttl)
		var wait time.Duration
		if holder != nil {
			wait = min(max(holder.expiry.Sub(l.now()), time.Millisecond), l.maxWait)
		}
		l.mu.Unlock()
		if ls != nil {
			return ls, nil
		}
		if t == nil {
			t = time.NewTimer(wait)
		} else {
			t.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-holder.done:
		case <-t.C:
		}
	}
}

type lease struct {
	l     *locker
	key   string
	token uint64

	expiry time.Time // last known expiry; guarded by l.mu
	ended  bool      // Release was called; guarded by l.mu
}

// Key implements lock.Lease.
func (s *lease) Key() string { return s.key }

// Token implements lock.Lease.
func (s *lease) Token() uint64 { return s.token }

// Expiry implements lock.Lease.
func (s *lease) Expiry() time.Time {
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	return s.expiry
}

// currentLocked returns the lease's entry if the lease still holds its key
// at now, dropping it if it expired. Called with l.mu held.
func (s *lease) currentLocked(now time.Time) *entry {
	e, ok := s.l.held[s.key]
	if !ok || e.token != s.token {
		return nil
	}
	if !now.Before(e.expiry) {
		s.l.drop(s.key, e)
		return nil
	}
	return e
}

// Extend implements lock.Lease.
func (s *lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := lock.CheckArgs(s.key, ttl); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	s.l.mu.Lock()
	defer s.l.mu.Unlock()
	now := s.l.now()
	e := s.currentLocked(now)
	if e == nil || s.ended {
		return lock.ErrLost
	}
	e.expiry = now.Add(ttl)
	s.expiry = e.expiry
	return nil
}

// Release implements lock.Lease.
func (s *lease) Release(context.Context) {
	s.l.mu.Lock()
	ended := s.ended
	s.ended = true
	e := s.currentLocked(s.l.now())
	if e != nil {
		s.l.drop(s.key, e)
	}
	s.l.mu.Unlock()
	if e == nil && !ended {
		s.l.log.Warn("lock lease lost before release", "key", s.key, "token", s.token, "expiry", s.Expiry())
	}
}
