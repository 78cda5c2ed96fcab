package redislock

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/lock"
)

// fenceScript advances or raises the fence counter of a key, but only while
// the mutex still holds this acquisition's value: the check and the write
// are one step, so that a holder that stalled between SET NX and the fence
// cannot take a token after the holder that replaced it.
//
//	KEYS[1]  the redsync mutex
//	KEYS[2]  the fence counter
//	ARGV[1]  this acquisition's mutex value
//	ARGV[2]  a floor for the counter: 0, or the quorum's token in round 2
//	ARGV[3]  "1" to advance the counter (round 1), "0" to only raise it
//	ARGV[4]  the counter's idle expiry in milliseconds
//
// It returns false (go-redis: redis.Nil) when the mutex is not ours, and
// otherwise the counter's new value: in round 1 the largest of the old
// value plus one, the floor and the server's clock in Unix microseconds
// (which stay exact in Lua's doubles; %d formats them without an
// exponent), in round 2 the larger of the old value and the floor. The
// candidate without the old value is written with SET ... GET, which
// answers the old value in the same command; only when the old value
// plus one (round 1), or the old value (round 2), is above the candidate
// (tokens within one microsecond, a clock set back, a raise to a lower
// floor) is the counter written again. A counter that is not a number,
// which this script never writes, counts as 0. Redis 6.2 and later have
// SET's GET option.
var fenceScript = redis.NewScript(`
if redis.call("GET", KEYS[1]) ~= ARGV[1] then return false end
local t = tonumber(ARGV[2])
local advance = ARGV[3] == "1"
if advance then
	local now = redis.call("TIME")
	local us = tonumber(now[1]) * 1000000 + tonumber(now[2])
	if us > t then t = us end
end
local old = tonumber(redis.call("SET", KEYS[2], string.format("%d", t), "PX", ARGV[4], "GET") or "0") or 0
if advance then old = old + 1 end
if old > t then
	t = old
	redis.call("SET", KEYS[2], string.format("%d", t), "PX", ARGV[4])
end
return t
`)

// errFenceLost: the mutex left a quorum of servers before the fence
// counter was advanced there, so the acquisition does not count.
var errFenceLost = errors.New("mutex lost before its fencing token was taken")

// fence takes the fencing token of the acquisition whose mutex on name
// holds value, on the servers where it does.
//
// Round 1 advances the counter on every server and takes the maximum over
// the quorum that answered. With several servers, round 2 raises the
// counter of a quorum to that maximum, so that a majority of servers carry
// the token before the lease is handed out: the package doc gives the
// argument. It returns errFenceLost when too few servers still hold the
// mutex, and an error wrapping lock.ErrTransient when too few answered.
func (l *locker) fence(ctx context.Context, name, value string, ttl time.Duration) (uint64, error) {
	t, err := l.fenceRound(ctx, name, value, ttl, 0, true)
	if err != nil || len(l.clients) == 1 {
		return t, err
	}
	if _, err := l.fenceRound(ctx, name, value, ttl, t, false); err != nil {
		return 0, err
	}
	return t, nil
}

// fenceRound runs fenceScript on every server at once, waits for every
// answer (each bounded by nodeTimeout), and returns the largest counter
// when a quorum answered with one.
func (l *locker) fenceRound(ctx context.Context, name, value string, ttl time.Duration, floor uint64, advance bool) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, nodeTimeout(ttl))
	defer cancel()
	keys := []string{name, name + ":fence"}
	adv := "0"
	if advance {
		adv = "1"
	}
	args := []any{value, strconv.FormatUint(floor, 10), adv, fenceIdle.Milliseconds()}
	type result struct {
		t   int64
		err error
	}
	results := make(chan result, len(l.clients))
	for _, c := range l.clients {
		go func() {
			t, err := fenceScript.Run(ctx, c, keys, args...).Int64()
			results <- result{t, err}
		}()
	}
	var (
		best        uint64
		ok, notOurs int
		errs        []error
	)
	for range l.clients {
		r := <-results
		switch {
		case r.err == nil && r.t > 0:
			ok++
			best = max(best, uint64(r.t))
		case errors.Is(r.err, redis.Nil):
			notOurs++
		case r.err == nil:
			errs = append(errs, fmt.Errorf("fence counter %d is not positive", r.t))
		default:
			errs = append(errs, r.err)
		}
	}
	switch {
	case ok >= l.quorum:
		return best, nil
	case notOurs > len(l.clients)-l.quorum:
		return 0, errFenceLost
	default:
		return 0, lock.Transient(fmt.Errorf("redislock: fencing token of %q: %d of %d servers answered, %d needed: %w",
			name, ok, len(l.clients), l.quorum, errors.Join(errs...)))
	}
}
