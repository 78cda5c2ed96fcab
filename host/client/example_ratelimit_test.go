package client_test

import (
	"context"
	"fmt"
	"log"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/hosttest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// Let a step call a partner at most once an hour, start three instances
// that call it, and list the rate limit keys: the first attempt ran, the
// two others are deferred, each holding its turn, and a fourth would
// wait three hours.
func ExampleClient_RateLimits() {
	c, stop := examplePluginClient(hosttest.AdminToken)
	defer stop()
	ctx := context.Background()
	// The kit example plugin (examples/plugins/kit), as `make plugins`
	// builds it.
	if _, _, err := c.PutPlugin(ctx, "kit", examplePlugin("kit")); err != nil {
		log.Fatal(err)
	}
	if _, _, err := c.PutWorkflow(ctx, "sync", []byte(`
name: sync
steps:
  - id: call
    activity: kit.echo
    input: "${ input }"
    rate_limit: { key: partner-api, limit: 1, per: 1h }
`)); err != nil {
		log.Fatal(err)
	}
	for _, id := range []string{"sync-1", "sync-2", "sync-3"} {
		if _, _, err := c.Start(ctx, "sync", apiv1.StartRequest{ID: id}, 0); err != nil {
			log.Fatal(err)
		}
	}

	// Each attempt takes its turn as its instance runs: wait for the
	// third.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		r, err := c.RateLimits(ctx, client.RateLimitFilter{Kind: apiv1.RateLimitStep})
		if err != nil {
			log.Fatal(err)
		}
		if len(r.Items) == 1 && r.Items[0].Ahead == 2 {
			k := r.Items[0]
			fmt.Printf("%s %q: %d per %s, burst %d; %d turns ahead, the next in %s\n",
				k.Kind, k.Key, k.Limit, k.Per, k.Burst, k.Ahead, time.Until(k.NextTurn).Round(time.Hour))
			break
		}
		if time.Now().After(deadline) {
			log.Fatalf("no key with two turns ahead after 30s: %+v", r.Items)
		}
	}
	// Output:
	// step "partner-api": 1 per 1h0m0s, burst 1; 2 turns ahead, the next in 3h0m0s
}

// examplePluginClient is exampleClient for an example that uploads a
// plugin: its host compiles plugins into the compilation cache that test
// processes share (testplugins.CacheDir), as the tests' hosts do, so that
// an upload compiles nothing a test has compiled.
func examplePluginClient(token string) (c *client.Client, stop func()) {
	h, err := hosttest.Start(hosttest.Options{
		API:  api.Config{Tokens: hosttest.Tokens()},
		Node: node.Config{Plugins: plugins.Config{CacheDir: testplugins.CacheDir(fatalTB{})}},
	})
	if err != nil {
		log.Fatal(err)
	}
	if c, err = client.New(client.Config{Server: h.URL, Token: token}); err != nil {
		log.Fatal(err)
	}
	return c, func() { _ = h.Close() }
}

// examplePlugin returns the example plugin examples/plugins/name, built
// by testplugins as `make plugins` builds it. Outside a test, a build that
// fails ends the program, as the examples' other errors do.
func examplePlugin(name string) []byte {
	return testplugins.Bytes(fatalTB{}, name)
}

// fatalTB is what testplugins uses of a testing.TB, for an example: a
// failure ends the program. Its other methods are the nil TB's, which
// testplugins' builds never call.
type fatalTB struct{ testing.TB }

func (fatalTB) Helper()                        {}
func (fatalTB) Fatal(args ...any)              { log.Fatal(args...) }
func (fatalTB) Fatalf(format string, a ...any) { log.Fatalf(format, a...) }
