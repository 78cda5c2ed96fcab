// Package redislimit is the rate limiter by key of the cluster mode: a
// key's state lives in Redis, so every node that shares the Redis shares
// the limit, and each decision is one Lua script — the GCRA of package
// ratelimit with reservation, derived from github.com/go-redis/redis_rate
// v10 (script.go says what changed, with the notices of its licences).
//
//	l, err := redislimit.New(redislimit.Config{Client: rdb})
//	wait, ok, err := l.Reserve(ctx, "partner", ratelimit.Limit{Count: 10, Per: time.Second}, 5*time.Second)
//	states, now, truncated, err := l.States(ctx, "step/", 100) // the keys in use, for an operator
//
// # Keys
//
// A limiter key k is one Redis key, a string holding its theoretical
// arrival time (TAT) in decimal Unix nanoseconds and the terms of its last
// granted event (the Limit's count, per in nanoseconds, and burst as the
// caller gave it, 0 included), separated by spaces:
//
//	weft:rate:{k} = "1777636800100000000 10 1000000000 20"
//
// The terms decide nothing (every call brings its own); they are there
// for States to show. Reserve also reads a value of the TAT alone, as
// versions before the terms wrote it, which a rolling upgrade finds until
// those keys expire; States shows such a key with the zero Limit.
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
// # Listing the keys
//
// States finds the keys with SCAN MATCH on every master of a
// *redis.ClusterClient (on the one server otherwise), 1,000 a round trip,
// reads them with a pipeline of GETs and reads Redis's TIME once. SCAN
// walks every key of a server, whatever the pattern (MATCH filters what it
// walked), so a call costs about one round trip per 1,000 keys that the
// Redis holds, store's keys included: it is for an operator's page, not
// for a hot path. Its answer is bounded: it stops scanning once it has
// seen ten times the states asked for, and says it was truncated. A
// key's TAT is read against that one TIME: on a cluster, against one
// server's clock, where each key's script reads its own master's.
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
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	res, err := reserveScript.Run(ctx, l.c, []string{l.Key(key)}, int64(interval), int64(offset), int64(max(maxWait, 0)),
		lim.Count, int64(lim.Per), lim.Burst).Int64Slice()
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

// The bounds of States.
const (
	// defaultStates is how many states States returns when its max is
	// not positive.
	defaultStates = 1000
	// scanCount is SCAN's COUNT: how many keys a round trip walks.
	scanCount = 1000
	// scanFactor bounds the keys States reads: it stops scanning once it
	// has seen scanFactor times the states asked for.
	scanFactor = 10
)

// States returns the keys whose TAT is ahead of the limiter's now,
// starting with prefix (all when empty), sorted by key, at most max of
// them (max ≤ 0: 1000) and whether there were more; and the limiter's now
// (Redis TIME), against which [ratelimit.KeyState.Backlog] is read. The
// keys are those given to Reserve. It is truncated, too, when it stopped
// scanning after 10·max keys (the package doc): its states are then the
// first of the keys it saw, not of all.
//
// # Errors
//
// States returns ctx.Err() when ctx is done before the call or ends
// during it; Redis's error wrapped with the address; and an error naming
// the Redis key of a value that is not a state (our own data: a foreign
// value is a bug to see, not to skip).
func (l *Limiter) States(ctx context.Context, prefix string, max int) (states []ratelimit.KeyState, now time.Time, truncated bool, err error) {
	if err := ctx.Err(); err != nil {
		return nil, time.Time{}, false, err
	}
	if max <= 0 {
		max = defaultStates
	}
	fail := func(err error) ([]ratelimit.KeyState, time.Time, bool, error) {
		if ctxErr := ctx.Err(); ctxErr != nil {
			return nil, time.Time{}, false, ctxErr
		}
		return nil, time.Time{}, false, fmt.Errorf("redislimit: states %q: %w", prefix, err)
	}
	keys, truncated, err := l.scan(ctx, l.prefix+"{"+prefix, scanFactor*max)
	if err != nil {
		return fail(err)
	}
	states, err = l.read(ctx, keys)
	if err != nil {
		return fail(err)
	}
	now, err = l.c.Time(ctx).Result()
	if err != nil {
		return fail(fmt.Errorf("TIME on %s: %w", l.addr, err))
	}
	states = slices.DeleteFunc(states, func(s ratelimit.KeyState) bool {
		return !s.TAT.After(now) || !strings.HasPrefix(s.Key, prefix)
	})
	slices.SortFunc(states, func(a, b ratelimit.KeyState) int { return cmp.Compare(a.Key, b.Key) })
	if len(states) > max {
		states, truncated = states[:max:max], true
	}
	return states, now, truncated, nil
}

// scan returns the Redis keys that start with start, from every master of
// a cluster or from the one server, and whether it stopped before the end
// because it had seen bound keys.
func (l *Limiter) scan(ctx context.Context, start string, bound int) (keys []string, stopped bool, err error) {
	match := globEscape(start) + "*"
	var mu sync.Mutex
	seen := map[string]struct{}{} // SCAN may return a key twice
	one := func(ctx context.Context, c redis.Cmdable, addr string) error {
		var cursor uint64
		for {
			batch, next, err := c.Scan(ctx, cursor, match, scanCount).Result()
			if err != nil {
				return fmt.Errorf("SCAN %s on %s: %w", match, addr, err)
			}
			mu.Lock()
			for _, k := range batch {
				seen[k] = struct{}{}
			}
			full := len(seen) >= bound && next != 0
			stopped = stopped || full
			mu.Unlock()
			if full || next == 0 {
				return nil
			}
			cursor = next
		}
	}
	if cc, ok := l.c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
			return one(ctx, c, c.Options().Addr)
		})
	} else {
		err = one(ctx, l.c, l.addr)
	}
	if err != nil {
		return nil, false, err
	}
	keys = make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	return keys, stopped, nil
}

// read returns the states of the Redis keys, in one pipeline; the keys
// that expired since they were seen are skipped.
func (l *Limiter) read(ctx context.Context, keys []string) ([]ratelimit.KeyState, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	cmds := make([]*redis.StringCmd, len(keys))
	_, err := l.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range keys {
			cmds[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("GET of %d keys on %s: %w", len(keys), l.addr, err)
	}
	states := make([]ratelimit.KeyState, 0, len(keys))
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("GET %s on %s: %w", keys[i], l.addr, err)
		}
		s, err := l.parse(keys[i], v)
		if err != nil {
			return nil, err
		}
		states = append(states, s)
	}
	return states, nil
}

// parse reads the state of Redis key rkey: its limiter key, and its value
// "<TAT> <count> <per> <burst>" or, written by an older version, "<TAT>".
func (l *Limiter) parse(rkey, v string) (ratelimit.KeyState, error) {
	key, ok := strings.CutPrefix(rkey, l.prefix+"{")
	if ok {
		key, ok = strings.CutSuffix(key, "}")
	}
	if !ok {
		return ratelimit.KeyState{}, fmt.Errorf("%s is not the key of a state: want %s{KEY}", rkey, l.prefix)
	}
	bad := func(why string) (ratelimit.KeyState, error) {
		return ratelimit.KeyState{}, fmt.Errorf("the value of %s, %q, is not a state (want \"<TAT> <count> <per> <burst>\" or \"<TAT>\"): %s", rkey, v, why)
	}
	fields := strings.Split(v, " ")
	if len(fields) != 1 && len(fields) != 4 {
		return bad(fmt.Sprintf("%d fields", len(fields)))
	}
	var n [4]int64
	for i, f := range fields {
		var err error
		if n[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			return bad(err.Error())
		}
	}
	s := ratelimit.KeyState{Key: key, TAT: time.Unix(0, n[0])}
	if len(fields) == 4 {
		s.Limit = ratelimit.Limit{Count: int(n[1]), Per: time.Duration(n[2]), Burst: int(n[3])}
		if err := s.Limit.Check(); err != nil {
			return bad(err.Error())
		}
	}
	return s, nil
}

// globEscape escapes the characters of s that SCAN's MATCH reads as a
// pattern, so that it matches s itself.
func globEscape(s string) string {
	var b strings.Builder
	for i := range len(s) { // bytes: a key need not be UTF-8
		if strings.IndexByte(`*?[]\`, s[i]) >= 0 {
			b.WriteByte('\\')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
