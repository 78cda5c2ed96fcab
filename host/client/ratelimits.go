package client

import (
	"context"

	"github.com/weftworks/weft/host/api/apiv1"
)

// RateLimitFilter selects the rate limit keys RateLimits returns; empty
// fields select all.
type RateLimitFilter struct {
	// Kind keeps the keys of one kind: the steps' or the host rules'.
	Kind apiv1.RateLimitKind
	// Prefix keeps the keys that start with it.
	Prefix string
	// Limit is the most keys; 0 lets the server choose.
	Limit int
}

// RateLimits lists the keys of the steps' rate limits and of the grants'
// host rules (docs/flow-control.md) whose granted turns reach past now:
// the steps' first, then the host rules', each by key; Truncated says
// whether f.Limit cut the list. Each shows the terms of its last turn,
// how many turns granted have not come yet, and when a turn asked for now
// would come. There are no pages: a key is listed only while its turns
// are being taken, so narrow the list with f.Prefix.
func (c *Client) RateLimits(ctx context.Context, f RateLimitFilter) (*apiv1.RateLimits, error) {
	q := pageQuery(ListOptions{Limit: f.Limit})
	if f.Kind != "" {
		q.Set("kind", string(f.Kind))
	}
	if f.Prefix != "" {
		q.Set("prefix", f.Prefix)
	}
	var r apiv1.RateLimits
	if err := c.getJSON(ctx, "/v1/rate-limits", q, &r); err != nil {
		return nil, err
	}
	return &r, nil
}
