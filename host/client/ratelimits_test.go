package client_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/testplugins"
)

// pingFlow and otherFlow call kit.echo under two step rate limits, one
// attempt an hour each: the first attempt of a key starts at once, the
// next ones are deferred, each holding its turn.
const (
	pingFlow = `
name: ping
steps:
  - { id: ping, activity: kit.echo, input: 1, rate_limit: { key: partner-api, limit: 1, per: 1h } }
`
	otherFlow = `
name: other
steps:
  - { id: ping, activity: kit.echo, input: 1, rate_limit: { key: zz-other, limit: 1, per: 1h } }
`
)

// TestClientRateLimits lists the rate limit keys through the client:
// three instances under one key, the first run and the others deferred,
// make a step key with two turns ahead and its next turn three hours
// away; the kind and the prefix select, the limit truncates, and an
// unknown kind is ErrInvalid naming kind.
func TestClientRateLimits(t *testing.T) {
	t.Parallel()
	url := startHost(t)
	c := newClient(t, url, adminToken)
	ctx := context.Background()
	if _, _, err := c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	for name, src := range map[string]string{"ping": pingFlow, "other": otherFlow} {
		if _, _, err := c.PutWorkflow(ctx, name, []byte(src)); err != nil {
			t.Fatal(err)
		}
	}
	before := time.Now()
	for _, id := range []string{"ping-1", "ping-2", "ping-3"} {
		if _, _, err := c.Start(ctx, "ping", apiv1.StartRequest{ID: id}, 0); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.Start(ctx, "other", apiv1.StartRequest{ID: "other-1"}, 0); err != nil {
		t.Fatal(err)
	}
	k := awaitRateKey(t, c, "partner-api", func(k apiv1.RateLimitKey) bool { return k.Ahead == 2 })
	if k.Kind != apiv1.RateLimitStep || k.Limit != 1 || k.Per != "1h0m0s" || k.Burst != 1 {
		t.Errorf("the key is %+v; want a step key, 1 per 1h0m0s, burst 1", k)
	}
	// Three turns granted an hour apart from about before: the next one
	// asked for would come at the fourth hour's start, three hours on.
	if next := k.NextTurn.Sub(before); next < 3*time.Hour || next > 3*time.Hour+time.Minute {
		t.Errorf("the next turn is %v after the starts, want 3h", next)
	}

	for _, tc := range []struct {
		f         client.RateLimitFilter
		keys      []string
		truncated bool
	}{
		{client.RateLimitFilter{}, []string{"partner-api", "zz-other"}, false},
		{client.RateLimitFilter{Kind: apiv1.RateLimitStep, Prefix: "partner"}, []string{"partner-api"}, false},
		{client.RateLimitFilter{Kind: apiv1.RateLimitHost}, nil, false},
		{client.RateLimitFilter{Prefix: "nobody"}, nil, false},
		{client.RateLimitFilter{Limit: 1}, []string{"partner-api"}, true},
	} {
		r, err := c.RateLimits(ctx, tc.f)
		if err != nil {
			t.Fatalf("RateLimits(%+v): %v", tc.f, err)
		}
		var keys []string
		for _, k := range r.Items {
			keys = append(keys, k.Key)
		}
		if r.Items == nil || !slices.Equal(keys, tc.keys) || r.Truncated != tc.truncated {
			t.Errorf("RateLimits(%+v): %+v, want the keys %q, truncated %v", tc.f, r, tc.keys, tc.truncated)
		}
	}

	var e *client.Error
	if _, err := c.RateLimits(ctx, client.RateLimitFilter{Kind: "queue"}); !errors.Is(err, client.ErrInvalid) || !errors.As(err, &e) || e.Errors[0].Path != "kind" {
		t.Errorf("RateLimits of an unknown kind: %v, want ErrInvalid naming kind", err)
	}
}

// awaitRateKey polls the rate limit keys until the key is listed and done
// says it is as wanted, and fails the test after 30 seconds.
func awaitRateKey(t *testing.T, c *client.Client, key string, done func(apiv1.RateLimitKey) bool) apiv1.RateLimitKey {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := c.RateLimits(context.Background(), client.RateLimitFilter{Prefix: key})
		if err != nil {
			t.Fatalf("RateLimits: %v", err)
		}
		for _, k := range r.Items {
			if k.Key == key && done(k) {
				return k
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("rate limit key %q is not as wanted after 30s: %+v", key, r.Items)
		}
		time.Sleep(20 * time.Millisecond) // polling with a deadline
	}
}
