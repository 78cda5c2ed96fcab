package redislock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/lock"
)

// extendScript moves a mutex key's expiry if it still holds this
// acquisition's value: redsync's extend, sent in a pipeline.
var extendScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) == ARGV[1] then
	return redis.call("PEXPIRE", KEYS[1], ARGV[2])
end
return 0`)

// ExtendLeases implements lock.BatchExtender: the leases of this Locker are
// extended with one pipeline per server, concurrently, each bounded like
// one Extend; a lease is extended when a quorum of servers extended it, and
// lost when so many servers answered that it is not held that no quorum
// can (an expired or taken key). Leases of other Lockers are extended one
// by one.
func (l *locker) ExtendLeases(ctx context.Context, leases []lock.Lease, ttl time.Duration) []error {
	errs := make([]error, len(leases))
	var own []int
	for i, ls := range leases {
		s, ok := ls.(*lease)
		if !ok || s.l != l {
			errs[i] = ls.Extend(ctx, ttl)
			continue
		}
		if err := checkArgs(s.key, ttl); err != nil {
			errs[i] = err
			continue
		}
		own = append(own, i)
	}
	if len(own) == 0 {
		return errs
	}
	if err := ctx.Err(); err != nil {
		for _, i := range own {
			errs[i] = err
		}
		return errs
	}
	// Take every lease's turn (Extend and Release are serialised per
	// lease), then drop those already over.
	start := l.now()
	var live []*lease
	var at []int
	for _, i := range own {
		s := leases[i].(*lease)
		select {
		case s.sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = ctx.Err()
			continue
		}
		s.mu.Lock()
		if !s.lost && !s.ended && !start.Before(s.expiry) {
			s.lost = true // never revived, as in Extend
		}
		gone := s.lost || s.ended
		s.mu.Unlock()
		if gone {
			<-s.sem
			errs[i] = fmt.Errorf("redislock: extend %q: %w", s.key, lock.ErrLost)
			continue
		}
		live = append(live, s)
		at = append(at, i)
	}
	defer func() {
		for _, s := range live {
			<-s.sem
		}
	}()
	if len(live) == 0 {
		return errs
	}

	// held[j][k]: server j extended lease k (1), said it is not held (0),
	// or could not answer (-1).
	held := make([][]int, len(l.clients))
	var wg sync.WaitGroup
	ectx, cancel := context.WithTimeout(ctx, nodeTimeout(ttl))
	defer cancel()
	for j, c := range l.clients {
		held[j] = make([]int, len(live))
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmds := make([]*redis.Cmd, len(live))
			_, _ = c.Pipelined(ectx, func(p redis.Pipeliner) error {
				for k, s := range live {
					cmds[k] = extendScript.Eval(ectx, p, []string{s.name}, s.value, ttl.Milliseconds())
				}
				return nil
			})
			for k, cmd := range cmds {
				switch n, err := cmd.Int64(); {
				case err != nil:
					held[j][k] = -1
				case n == 1:
					held[j][k] = 1
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		// The servers may or may not have extended: the old expiry stays.
		for _, i := range at {
			errs[i] = err
		}
		return errs
	}
	for k, s := range live {
		var yes, no int
		for j := range l.clients {
			switch held[j][k] {
			case 1:
				yes++
			case 0:
				no++
			}
		}
		s.mu.Lock()
		switch {
		case yes >= l.quorum:
			s.expiry = start.Add(ttl - drift(ttl))
		case no > len(l.clients)-l.quorum:
			s.lost = true
			errs[at[k]] = fmt.Errorf("redislock: extend %q: %w", s.key, lock.ErrLost)
		default:
			errs[at[k]] = lock.Transient(fmt.Errorf("redislock: extend %q: %d of %d servers extended it, %d needed", s.key, yes, len(l.clients), l.quorum))
		}
		s.mu.Unlock()
	}
	return errs
}
