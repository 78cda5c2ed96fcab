// Package redislimit is the rate limiter by key of the cluster mode: a
// key's state lives in Redis, so every node that shares the Redis shares
// the limit, and each decision is one Lua script — the GCRA of package
// ratelimit with reservation, derived from github.com/go-redis/redis_rate
// v10 (script.go says what changed, with the notices of its licences).
//
//	l, err := redislimit.New(redislimit.Config{Client: rdb})
//	wait, ok, err := l.Reserve(ctx, "partner", ratelimit.Limit{Count: 10, Per: time.Second}, 5*time.Second)
//
// # Keys
//
// A limiter key k is one Redis key, a string holding its theoretical
// arrival time (TAT) in decimal Unix nanoseconds:
//
//	weft:rate:{k}
//
// Each key is its own cluster hash tag (the braces), so that a Redis
// Cluster spreads the keys over its shards; a key that holds a brace
// changes which part of it is hashed, never which Redis key it names. The
// Redis key expires when its TAT passes (the TAT rounded up to the
// millisecond): an idle key is the same as no key, so idle keys vanish
// and Redis holds only the keys in use. The caller bounds the length of
// its keys (definitions and grants do).
//
// # Time
//
// The script reads Redis's TIME, not the nodes' clocks, as redis_rate
// does: a node whose clock is ahead would otherwise find every key idle
// and grant extra events, and one behind would wait for nothing. (The
// store does the opposite: its scripts take the nodes' times, and Redis's
// clock decides nothing there; internal/store/redisstore.) The wait a
// node is told is counted
// from when Redis ran the script; the node acts after it from when the
// answer arrived, a round trip later at most, which spaces its events by
// the same interval. A failover to a replica whose clock differs moves
// every key's timeline by the difference, once.
//
// # Failures
//
// Reserve is one round trip (EVALSHA, and EVAL once per server when the
// script is not loaded there). When the call fails, the error names the
// key and the address, and the event was taken or not: a lost answer of
// a granted reservation wastes that slot, never grants an extra one.
// Redis runs a script whole, and the script writes once, after its last
// check.
package redislimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/ratelimit"
)

// Config configures a Limiter. Only Client is required.
type Config struct {
	// Client is the Redis the keys live on: a *redis.Client or a
	// *redis.ClusterClient. The caller owns it (it may share it with the
	// store and the locker) and closes it. Required.
	Client redis.UniversalClient

	// Prefix starts every key the limiter writes. It must not contain
	// braces, which would make one hash tag of all the keys. Defaults to
	// "weft:".
	Prefix string
}

// Limiter decides events by key in Redis, shared by every Limiter on the
// same Redis and Prefix, in this process or another. It is safe for
// concurrent use.
type Limiter struct {
	c      redis.UniversalClient
	prefix string // Prefix + "rate:"
	addr   string
}

// New returns a Limiter on cfg.Client. It does not contact Redis.
//
// # Errors
//
// New fails, naming the field, when Client is nil or Prefix holds a brace.
func New(cfg Config) (*Limiter, error) {
	if cfg.Client == nil {
		return nil, errors.New("redislimit: Config.Client is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "weft:"
	}
	if strings.ContainsAny(cfg.Prefix, "{}") {
		return nil, fmt.Errorf("redislimit: Config.Prefix %q must not contain braces: they would become the cluster hash tag of every key", cfg.Prefix)
	}
	return &Limiter{c: cfg.Client, prefix: cfg.Prefix + "rate:", addr: addrOf(cfg.Client)}, nil
}

// addrOf names the Redis of a client in errors.
func addrOf(c redis.UniversalClient) string {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().Addr
	case *redis.ClusterClient:
		return strings.Join(c.Options().Addrs, ",")
	}
	return "redis"
}

// Key returns the Redis key that holds the state of key.
func (l *Limiter) Key(key string) string { return l.prefix + "{" + key + "}" }

// Reserve takes the next event of key under lim if it may happen within
// maxWait from now, and says how long to wait for it (0: at once). When
// the wait would be longer, it takes nothing (the key's state is
// unchanged) and returns ok false with the wait it would have had. A
// negative maxWait is read as 0. Now is Redis's time.
//
// # Errors
//
// Reserve returns ctx.Err() when ctx is done before the call or ends
// during it, an error wrapping [ratelimit.ErrLimit] when lim is invalid
// (without calling Redis), and otherwise Redis's error wrapped with the
// key and the address.
func (l *Limiter) Reserve(ctx context.Context, key string, lim ratelimit.Limit, maxWait time.Duration) (wait time.Duration, ok bool, err error) {
	if err := ctx.Err(); err != nil {
		return 0, false, err
	}
	if err := lim.Check(); err != nil {
		return 0, false, fmt.Errorf("redislimit: reserve %q: %w", key, err)
	}
	interval := lim.Interval()
	offset := time.Duration(math.MaxInt64)
	if b := int64(lim.EffectiveBurst() - 1); b <= math.MaxInt64/int64(interval) {
		offset = time.Duration(b) * interval
	}
	res, err := reserveScript.Run(ctx, l.c, []string{l.Key(key)}, int64(interval), int64(offset), int64(max(maxWait, 0))).Int64Slice()
	if err != nil {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return 0, false, ctxErr
		}
		return 0, false, fmt.Errorf("redislimit: reserve %q on %s: %w", key, l.addr, err)
	}
	if len(res) != 2 || res[0] < 0 || res[0] > 1 || res[1] < 0 {
		return 0, false, fmt.Errorf("redislimit: reserve %q on %s: unexpected answer %v", key, l.addr, res)
	}
	return time.Duration(res[1]), res[0] == 1, nil
}
