package plugins

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/plugins/grant"
)

// RateLimiter decides when the requests under a host rule with a rate
// limit (grant.RateLimit) may be sent. It keeps the budget of each key,
// which every plugin and, in a cluster, every node shares: the node gives
// the runtime an in-process limiter on the embedded store and a Redis one
// in a cluster (internal/ratelimit). It must be safe for concurrent use.
type RateLimiter interface {
	// Reserve takes the next event of key under l if it may happen within
	// maxWait from now, and says how long to wait for it (0: at once).
	// When the wait would be longer, it takes nothing and returns ok false
	// with the wait it would have had.
	Reserve(ctx context.Context, key string, l ratelimit.Limit, maxWait time.Duration) (wait time.Duration, ok bool, err error)
}

// HostRateKeyPrefix starts the key of every host rule's budget as the
// RateLimiter sees it ("host/partner"), so that a host rule's
// budget is never another kind of limit's.
const HostRateKeyPrefix = "host/"

// RateLimitedHeader names the header of the synthetic 429 that a request
// gets instead of being sent: the key whose budget had no turn for it
// soon enough.
const RateLimitedHeader = "Weft-Rate-Limited"

// refusal is a hop that its rule's rate limit kept from being sent.
type refusal struct {
	rule *grant.Host
	key  string
	// wait is how long the hop would have waited for its turn, and
	// maxWait how long it could.
	wait, maxWait time.Duration
}

// retryAfter is wait in whole seconds, rounded up, at least 1: the value
// of the 429's Retry-After header.
func (r *refusal) retryAfter() int64 {
	s := (r.wait + time.Second - 1) / time.Second
	return max(int64(s), 1)
}

// response is the synthetic 429 the guest reads in place of an answer.
func (r *refusal) response(req *http.Request) *http.Response {
	h := http.Header{}
	h.Set("Retry-After", strconv.FormatInt(r.retryAfter(), 10))
	h.Set(RateLimitedHeader, r.key)
	return &http.Response{
		Status:     "429 Too Many Requests",
		StatusCode: http.StatusTooManyRequests,
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        h,
		Body:          http.NoBody,
		ContentLength: 0,
		Request:       req,
	}
}

// note is the warning the activity's log gets.
func (r *refusal) note(method, host, path string) string {
	return fmt.Sprintf("%s %s%s: not sent: the rate limit of host rule %s (key %s, %s) has no turn for it within %s (its turn was %s away); answered 429 with Retry-After: %d",
		method, host, path, r.rule.Pattern, r.key, r.rule.RateLimit.Limit, r.maxWait.Round(time.Millisecond), r.wait.Round(time.Millisecond), r.retryAfter())
}

// limiterError is why a request under a host rule with a rate limit was
// neither sent nor refused: the limiter failed (Redis unreachable). The
// attempt fails with it, of the failure kind host (retried: another node,
// or a later moment, may reach the limiter), since sending the request
// unlimited would break the limit. It matches none of call's sentinels.
type limiterError struct {
	// Key is the budget's key, as the rule names it (without
	// HostRateKeyPrefix).
	Key string
	// Rule is the pattern of the host rule.
	Rule string
	Err  error
}

// Error implements error.
func (e *limiterError) Error() string {
	return fmt.Sprintf("the rate limiter failed to give a turn under host rule %s (key %s), so the request was not sent: %v", e.Rule, e.Key, e.Err)
}

// Unwrap returns the limiter's error.
func (e *limiterError) Unwrap() error { return e.Err }

// takeTurn waits for a hop's turn under its rule's rate limit. It returns
// a *refusal when the turn is further away than the rule's max_wait or
// the request's deadline (a turn after the deadline would be wasted); an
// error when the limiter failed (a *limiterError) or the request's
// context ended during the wait; and neither when the hop may go.
func (o *outbound) takeTurn(ctx context.Context, rule *grant.Host) (*refusal, error) {
	rl := rule.RateLimit
	key := rule.RateKey()
	maxWait := rl.MaxWait
	if d, ok := ctx.Deadline(); ok {
		maxWait = max(min(maxWait, time.Until(d)), 0)
	}
	wait, ok, err := o.limiter.Reserve(ctx, HostRateKeyPrefix+key, rl.Limit, maxWait)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, &limiterError{Key: key, Rule: rule.Pattern, Err: err}
	}
	if !ok {
		return &refusal{rule: rule, key: key, wait: wait, maxWait: maxWait}, nil
	}
	if wait <= 0 {
		return nil, nil
	}
	// The turn is taken: a wait cut short wastes it, which errs on the
	// side of the limit.
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// closeBody closes the body of a request that is not sent, as a
// RoundTripper must.
func closeBody(r *http.Request) {
	if r.Body != nil {
		_ = r.Body.Close()
	}
}
