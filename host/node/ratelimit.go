package node

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/plugins"
)

// rateLimiter is what the node needs of its rate limiter (locallimit's or
// redislimit's): turns for the engine and the plugins, and the keys it
// keeps, for the API.
type rateLimiter interface {
	plugins.RateLimiter
	// States returns the keys whose turns reach past the limiter's now,
	// starting with prefix, sorted, at most max, whether there were more,
	// and that now.
	States(ctx context.Context, prefix string, max int) ([]ratelimit.KeyState, time.Time, bool, error)
}

// rateKinds are the kinds of rate limit keys, by the prefix of the
// limiter's keys.
var rateKinds = []struct{ kind, prefix string }{
	{"step", engine.StepRateKeyPrefix},
	{"host", plugins.HostRateKeyPrefix},
}

// RateLimits returns the rate limit keys (docs/flow-control.md, "Rate
// limits") with turns granted that reach past now: of kind ("step" or
// "host"; both when empty), whose key starts with prefix, sorted by kind
// and key, at most limit of them (weft.ClampLimit), and whether there were
// more. Idle keys are not kept, so not listed: a key is shown from its
// first turn until its last turn has come.
func (n *Node) RateLimits(ctx context.Context, kind, prefix string, limit int) ([]weft.RateLimitKey, bool, error) {
	limit = weft.ClampLimit(limit)
	var (
		out       []weft.RateLimitKey
		truncated bool
	)
	for _, k := range rateKinds {
		if kind != "" && kind != k.kind {
			continue
		}
		room := limit - len(out)
		states, now, more, err := n.limiter.States(ctx, k.prefix+prefix, max(room, 1))
		if err != nil {
			return nil, false, fmt.Errorf("node: reading the %s rate limits: %w", k.kind, err)
		}
		if room == 0 { // full: whether this kind has keys at all
			truncated = truncated || len(states) > 0
			continue
		}
		truncated = truncated || more
		for _, s := range states {
			ahead, next := s.Backlog(now)
			out = append(out, weft.RateLimitKey{
				Kind: k.kind, Key: strings.TrimPrefix(s.Key, k.prefix),
				Limit: s.Limit.Count, Per: s.Limit.Per, Burst: s.Limit.EffectiveBurst(),
				Ahead: ahead, NextTurn: next,
			})
		}
	}
	return out, truncated, nil
}
