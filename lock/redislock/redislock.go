package redislock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/lock"
)

// Config configures the Redis Locker. Only Clients is required: New fills
// every other unset field.
type Config struct {
	// Clients are the Redis deployments the lock lives on: one, or several
	// independent servers for a Redlock quorum of len(Clients)/2+1 (use an
	// odd number: four servers tolerate no more failures than three).
	// Clients with ContextTimeoutEnabled let ctx deadlines bound each call;
	// without it, a server that hangs holds a call for the client's
	// ReadTimeout. Required.
	Clients []redis.UniversalClient

	// Retry says how transient errors (a server or a quorum unreachable)
	// are retried by Acquire and TryAcquire. Defaults to the policy of
	// every lock backend (lock.RetryPolicy's zero value): 3 retries, 500ms
	// initial delay, doubling, with jitter.
	Retry lock.RetryPolicy

	// Logger receives the locker's logs: releases that failed or found
	// the lease already lost. Defaults to slog.Default().
	Logger *slog.Logger

	// Now is the clock for a lease's Expiry, and for Extend's refusal to
	// revive a lease past it. Redis decides the real expiry by its own
	// clock. Defaults to time.Now.
	Now func() time.Time

	// Prefix starts every key the locker writes. It must not contain
	// braces, which would change the keys' cluster hash tag. Defaults to
	// "weft:".
	Prefix string
}

// WithDefaults returns a copy of c with every unset field except Clients
// set to its default.
func (c Config) WithDefaults() Config {
	c.Retry = c.Retry.WithDefaults()
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Prefix == "" {
		c.Prefix = "weft:"
	}
	return c
}

// validate reports the first field with an impossible value, naming it.
func (c Config) validate() error {
	if len(c.Clients) == 0 {
		return errors.New("redislock: Config.Clients must hold at least one client")
	}
	for i, cl := range c.Clients {
		if cl == nil {
			return fmt.Errorf("redislock: Config.Clients[%d] is nil", i)
		}
	}
	if strings.ContainsAny(c.Prefix, "{}") {
		return fmt.Errorf("redislock: Config.Prefix %q must not contain braces: they would become the cluster hash tag of every key", c.Prefix)
	}
	return c.Retry.Validate()
}

// Tuning that Config does not expose.
const (
	// pollMin and pollMax bound the interval at which Acquire polls a key
	// held by another Locker; the interval doubles from pollMin.
	pollMin = time.Millisecond
	pollMax = 50 * time.Millisecond
	// releaseTimeout bounds Release, which runs even when its ctx is done,
	// and the undoing of a failed acquisition. A server that does not
	// answer within it keeps the key until its TTL.
	releaseTimeout = time.Second
	// minTTL is the shortest ttl accepted: Redis counts expiries in
	// milliseconds, and Redlock deducts 1% and 2ms from every lease's
	// validity for clock drift.
	minTTL = 10 * time.Millisecond
	// fenceIdle is how long a fence counter outlives the last acquisition
	// of its key; see the package doc for why expiring it is safe.
	fenceIdle = 24 * time.Hour
)

// New returns a Locker on the Redis deployments of cfg.Clients, safe for
// concurrent use. Lockers on the same servers and Prefix exclude each other,
// in this process or another.
//
// # Errors
//
// New fails, naming the field, when Clients is empty or holds a nil
// client, when Prefix holds a brace, or when Retry is invalid. It does not
// contact the servers.
func New(cfg Config) (lock.Locker, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	pools := make([]redsyncredis.Pool, len(cfg.Clients))
	for i, c := range cfg.Clients {
		pools[i] = goredis.NewPool(c)
	}
	return &locker{
		clients: cfg.Clients,
		rs:      redsync.New(pools...),
		quorum:  len(cfg.Clients)/2 + 1,
		retry:   cfg.Retry,
		log:     cfg.Logger,
		now:     cfg.Now,
		prefix:  cfg.Prefix,
		watched: make(map[string]*watch),
	}, nil
}

type locker struct {
	clients []redis.UniversalClient
	rs      *redsync.Redsync
	quorum  int
	retry   lock.RetryPolicy
	log     *slog.Logger
	now     func() time.Time
	prefix  string

	mu      sync.Mutex
	watched map[string]*watch // keys this Locker's Acquire calls wait on
}

// watch lets the waiters of one Locker wake at once when a lease of the
// same Locker on their key is released, instead of at their next poll.
type watch struct {
	released chan struct{} // closed by the release
	waiters  int           // guarded by locker.mu
}

// watchKey registers a waiter on key.
func (l *locker) watchKey(key string) *watch {
	l.mu.Lock()
	defer l.mu.Unlock()
	w, ok := l.watched[key]
	if !ok {
		w = &watch{released: make(chan struct{})}
		l.watched[key] = w
	}
	w.waiters++
	return w
}

// unwatchKey ends a waiter's registration, dropping the entry when it was
// the last waiter.
func (l *locker) unwatchKey(key string, w *watch) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w.waiters--
	if w.waiters == 0 && l.watched[key] == w {
		delete(l.watched, key)
	}
}

// wake wakes the waiters on key after a release.
func (l *locker) wake(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if w, ok := l.watched[key]; ok {
		close(w.released)
		delete(l.watched, key)
	}
}

// checkArgs is lock.CheckArgs with this backend's shortest ttl.
func checkArgs(key string, ttl time.Duration) error {
	if err := lock.CheckArgs(key, ttl); err != nil {
		return err
	}
	if ttl < minTTL {
		return fmt.Errorf("redislock: ttl %s of %q is below the %s minimum", ttl, key, minTTL)
	}
	return nil
}

// mutexKey returns the redsync mutex's key for a lock key. The braces make
// the key its own cluster hash tag, shared with the fence counter; a key
// that begins with a hash tag of its own ("{tag}rest") keeps it, so that
// a lock can live in the slot of the data it guards.
func (l *locker) mutexKey(key string) string {
	if strings.HasPrefix(key, "{") {
		if end := strings.IndexByte(key, '}'); end > 1 {
			return l.prefix + "lock:" + key
		}
	}
	return l.prefix + "lock:{" + key + "}"
}

// Acquire implements lock.Locker.
func (l *locker) Acquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, error) {
	if err := checkArgs(key, ttl); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// Registered before the first attempt, so that a release between an
	// attempt and the wait that follows it is not missed.
	w := l.watchKey(key)
	defer func() { l.unwatchKey(key, w) }()
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	polls, failures := 0, 0
	for {
		ls, err := l.attempt(ctx, key, ttl)
		var wait time.Duration
		switch {
		case ls != nil:
			if err := ctx.Err(); err != nil {
				// The caller stopped waiting during the attempt: it
				// must not hold a lock it does not know about.
				ls.Release(ctx)
				return nil, err
			}
			return ls, nil
		case err != nil:
			failures++
			if failures > l.retry.Retries() {
				return nil, err
			}
			wait = l.retry.Delay(failures, rand.Float64)
		default: // held: waiting is not a retry
			failures = 0
			polls++
			wait = pollDelay(polls)
		}
		if timer == nil {
			timer = time.NewTimer(wait)
		} else {
			timer.Reset(wait)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
		case <-w.released:
			l.unwatchKey(key, w)
			w = l.watchKey(key)
			polls = 0
		}
	}
}

// pollDelay returns the wait before poll number n+1 of a held key: pollMin
// doubling up to pollMax, with ±50% jitter so that waiters on several nodes
// spread out.
func pollDelay(n int) time.Duration {
	d := pollMax
	if n < 16 {
		d = min(pollMin<<(n-1), pollMax)
	}
	return time.Duration(float64(d) * (0.5 + rand.Float64()))
}

// TryAcquire implements lock.Locker.
func (l *locker) TryAcquire(ctx context.Context, key string, ttl time.Duration) (lock.Lease, bool, error) {
	if err := checkArgs(key, ttl); err != nil {
		return nil, false, err
	}
	var ls *lease
	err := l.retry.Do(ctx, nil, func(ctx context.Context) error {
		var err error
		ls, err = l.attempt(ctx, key, ttl)
		return err
	})
	switch {
	case err != nil:
		return nil, false, err
	case ls == nil:
		return nil, false, nil
	case ctx.Err() != nil:
		// As in Acquire: a caller that stopped waiting holds nothing.
		ls.Release(ctx)
		return nil, false, ctx.Err()
	}
	return ls, true, nil
}

// attempt tries once to take key: it returns a lease, or nil and a nil
// error when another lease holds the key, or nil and an error wrapping
// lock.ErrTransient. It runs to its end even if ctx ends meanwhile, so
// that a partial acquisition is undone rather than left for its TTL; each
// server call is bounded by nodeTimeout(ttl).
func (l *locker) attempt(ctx context.Context, key string, ttl time.Duration) (*lease, error) {
	ctx = context.WithoutCancel(ctx)
	start, began := l.now(), time.Now()
	name := l.mutexKey(key)
	m := l.rs.NewMutex(name,
		redsync.WithExpiry(ttl),
		redsync.WithTries(1),
		redsync.WithTimeoutFactor(float64(nodeTimeout(ttl))/float64(ttl)),
		redsync.WithDriftFactor(driftFactor),
	)
	if err := m.TryLockContext(ctx); err != nil {
		if taken(err) {
			return nil, nil
		}
		return nil, lock.Transient(fmt.Errorf("redislock: acquire %q: %w", key, err))
	}
	token, err := l.fence(ctx, name, m.Value(), ttl)
	if err == nil && time.Since(began) >= ttl-drift(ttl) {
		err = lock.Transient(fmt.Errorf("redislock: acquire %q: took %s, longer than the ttl %s allows", key, time.Since(began), ttl))
	}
	if err != nil {
		if _, uerr := l.unlock(ctx, key, m.Value()); uerr != nil {
			l.log.Debug("lock: undoing a failed acquisition", "key", key, "error", uerr)
		}
		if errors.Is(err, errFenceLost) {
			return nil, nil // the mutex expired under us: someone else may hold it
		}
		return nil, err
	}
	return &lease{
		l:      l,
		key:    key,
		name:   name,
		value:  m.Value(),
		token:  token,
		sem:    make(chan struct{}, 1),
		expiry: start.Add(ttl - drift(ttl)),
	}, nil
}

// driftFactor is the share of the ttl that Redlock deducts for clock drift
// between the servers and us; drift adds 2ms for process scheduling, as the
// Redlock description does.
const driftFactor = 0.01

func drift(ttl time.Duration) time.Duration {
	return time.Duration(float64(ttl)*driftFactor) + 2*time.Millisecond
}

// nodeTimeout bounds each server call of an acquisition: a twentieth of the
// ttl, as Redlock advises so that a dead server cannot eat the lease's
// validity, but at least 50ms (or half the ttl, if shorter) so that a
// short ttl is not failed by a busy loopback.
func nodeTimeout(ttl time.Duration) time.Duration {
	return max(ttl/20, min(ttl/2, 50*time.Millisecond))
}

// taken reports whether redsync's error says the key is held elsewhere: on
// a quorum of servers, or on at least one while the others were
// unreachable, where waiting is the right answer rather than a retry.
func taken(err error) bool {
	var quorum *redsync.ErrTaken
	var node *redsync.ErrNodeTaken
	return errors.As(err, &quorum) || errors.As(err, &node)
}

// unlock deletes the mutex key on every server where it still holds value,
// within releaseTimeout whatever ctx says, and wakes this Locker's waiters
// on key. It reports ok when a quorum deleted it.
func (l *locker) unlock(ctx context.Context, key, value string) (ok bool, err error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	m := l.rs.NewMutex(l.mutexKey(key), redsync.WithValue(value))
	ok, err = m.UnlockContext(ctx)
	l.wake(key)
	return ok, err
}
