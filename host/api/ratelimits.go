package api

import (
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/weft"
)

// Rate limits by key (docs/flow-control.md): GET /v1/rate-limits shows,
// through the node, the keys of the steps' rate limits and of the grants'
// host rules whose granted turns reach past now. It only reads: a key's
// turns are taken as attempts and requests ask for them.

// maxRatePrefix bounds ?prefix= of GET /v1/rate-limits, in bytes: no key
// is longer (a step's key is at most weft.MaxFairnessKey bytes, as a
// workflow's concurrency key).
const maxRatePrefix = weft.MaxFairnessKey

// viewRateLimitKey is a rate limit key as answered.
func viewRateLimitKey(k weft.RateLimitKey) apiv1.RateLimitKey {
	return apiv1.RateLimitKey{
		Kind: apiv1.RateLimitKind(k.Kind), Key: k.Key,
		Limit: k.Limit, Per: k.Per.String(), Burst: k.Burst,
		Ahead: k.Ahead, NextTurn: k.NextTurn,
	}
}

// listRateLimits answers the rate limit keys with turns granted that
// reach past now: of ?kind= (step or host; both when absent), whose key
// starts with ?prefix=, the steps' first, each kind by key, at most
// ?limit= of them and whether there were more.
func (s *Server) listRateLimits(c *fiber.Ctx) error {
	limit, err := limitParam(c)
	if err != nil {
		return err
	}
	kind := c.Query("kind")
	switch apiv1.RateLimitKind(kind) {
	case "", apiv1.RateLimitStep, apiv1.RateLimitHost:
	default:
		return invalidField("kind", "%q is no kind of rate limit: step or host", kind)
	}
	prefix := c.Query("prefix")
	switch {
	case len(prefix) > maxRatePrefix:
		return invalidField("prefix", "%d bytes, longer than any key (at most %d)", len(prefix), maxRatePrefix)
	case !utf8.ValidString(prefix):
		return invalidField("prefix", "not valid UTF-8, which no key is")
	}
	ctx, cancel := requestContext(c, s.cfg.RequestTimeout)
	defer cancel()
	keys, truncated, err := s.node.RateLimits(ctx, kind, prefix, limit)
	if err != nil {
		return err
	}
	items := make([]apiv1.RateLimitKey, len(keys))
	for i, k := range keys {
		items[i] = viewRateLimitKey(k)
	}
	return c.JSON(apiv1.RateLimits{Items: items, Truncated: truncated})
}
