package node_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// A host rule's rate limit is one budget for the whole cluster: the
// nodes keep it in Redis, under the store's prefix, so the request of an
// instance run after another's, on whichever node, finds the turn taken
// and gets the host's 429. A step's rate limit lives there too.
func TestHostRateLimitAcrossACluster(t *testing.T) {
	t.Parallel()
	remote := newCounter(t)
	srv := redistest.Start(t)
	a := clusterNode(t, "a", srv.Addr())
	b := clusterNode(t, "b", srv.Addr())
	ctx := context.Background()
	if err := a.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	wasm, err := os.ReadFile(testplugins.Testdata(t, "plugins/testdata/httpprobe"))
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.PutPlugin(ctx, "probe", wasm); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(`
name: limited
steps:
  - id: call
    activity: probe.do
    input: { url: "${ input }" }
    retry: { max_attempts: 1 }
    rate_limit: { key: steps, limit: 1, per: 1h, burst: 2 }
    output: call
output: "${ vars.call }"
`)); err != nil {
		t.Fatal(err)
	}
	doc := `{"hosts":[{"pattern":"http://127.0.0.1:*","private_networks":true,"rate_limit":{"limit":1,"per":"1h","key":"remote"}}]}`
	if _, _, err := b.PutGrants(ctx, "probe", []byte(doc), weft.AnyRevision); err != nil {
		t.Fatal(err)
	}
	url, err := json.Marshal(remote.URL)
	if err != nil {
		t.Fatal(err)
	}
	statuses := []int{}
	for _, on := range []*node.Node{a, b} {
		inst, _, err := on.Engine().Start(ctx, "limited", url, "")
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		done, err := on.Engine().WaitFinished(wctx, inst.ID)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var out []struct {
			Status  int    `json:"status"`
			Headers string `json:"headers"`
		}
		if err := json.Unmarshal(done.Output, &out); done.Status != weft.StatusCompleted || err != nil || len(out) != 1 {
			t.Fatalf("%s: output %s (%v)", done.Status, done.Output, err)
		}
		statuses = append(statuses, out[0].Status)
		if out[0].Status == 429 {
			hist, err := on.Store().History(ctx, done.ID, 0, 100)
			if err != nil {
				t.Fatal(err)
			}
			if !hasEvent(hist, "activity_completed", `"status":429,"error":"rate_limited"`) {
				t.Errorf("the attempt's record does not say rate_limited:\n%s", dump(hist))
			}
		}
	}
	if statuses[0] != 200 || statuses[1] != 429 || remote.count() != 1 {
		t.Errorf("statuses %v, %d requests sent; want 200 then 429, one sent", statuses, remote.count())
	}
	// The budget is Redis's: its key is under the store's prefix.
	rdb := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { rdb.Close() })
	if n, err := rdb.Exists(ctx, "weft:rate:{"+plugins.HostRateKeyPrefix+"remote}").Result(); err != nil || n != 1 {
		t.Errorf("the key of the budget in Redis: %d, %v", n, err)
	}
	// So is a step's rate limit's: the engine shares the node's limiter.
	if n, err := rdb.Exists(ctx, "weft:rate:{step/steps}").Result(); err != nil || n != 1 {
		t.Errorf("the key of the step's budget in Redis: %d, %v", n, err)
	}
}

// counter is a server that answers 200 and counts the requests.
type counter struct {
	*httptest.Server
	n atomic.Int64
}

func newCounter(t *testing.T) *counter {
	c := &counter{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { c.n.Add(1) }))
	t.Cleanup(c.Close)
	return c
}

func (c *counter) count() int64 { return c.n.Load() }
