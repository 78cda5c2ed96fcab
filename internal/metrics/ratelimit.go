package metrics

import (
	"context"
	"strings"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/plugins"
)

// RateLimiter returns inner decorated to count the turns it is asked for,
// by kind of key (step: an activity step's rate_limit; host: a grant's
// host rule) and result (granted, refused: the turn was further than the
// caller would wait; error), and to record how long the granted turns
// were ahead (weft_rate_limit_wait_seconds). Keys are never labels: their
// number has no bound (GET /v1/rate-limits lists them).
func RateLimiter(m *Metrics, inner plugins.RateLimiter) plugins.RateLimiter {
	return &rateLimiter{m: m, inner: inner}
}

type rateLimiter struct {
	m     *Metrics
	inner plugins.RateLimiter
}

// rateKeyKind reduces a limiter's key to its kind: the host rules' keys
// start with plugins.HostRateKeyPrefix, and every other key is a step's.
func rateKeyKind(key string) string {
	if strings.HasPrefix(key, plugins.HostRateKeyPrefix) {
		return "host"
	}
	return "step"
}

// Reserve implements plugins.RateLimiter and the engine's RateLimiter.
func (r *rateLimiter) Reserve(ctx context.Context, key string, l ratelimit.Limit, maxWait time.Duration) (time.Duration, bool, error) {
	wait, ok, err := r.inner.Reserve(ctx, key, l, maxWait)
	kind := rateKeyKind(key)
	switch {
	case err != nil:
		r.m.rateTurns.WithLabelValues(kind, "error").Inc()
	case !ok:
		r.m.rateTurns.WithLabelValues(kind, "refused").Inc()
	default:
		r.m.rateTurns.WithLabelValues(kind, "granted").Inc()
		r.m.rateWait.WithLabelValues(kind).Observe(wait.Seconds())
	}
	return wait, ok, err
}
