package plugins_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// Call.LoadGrants is called once per call, when the guest first needs the
// grants, and not at all by a call that needs none; its error fails the
// call.
func TestGrantsAreReadWhenFirstNeeded(t *testing.T) {
	// Not parallel: t.Setenv.
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	p := newHTTPProbe(t, plugins.Config{})
	var loads atomic.Int32
	loading := func(g *grant.Set, err error) func(*call.Call) {
		return func(c *call.Call) {
			c.Grants = nil
			c.LoadGrants = func(context.Context) (*grant.Set, error) {
				loads.Add(1)
				return g, err
			}
		}
	}

	rs, err := p.do(context.Background(), nil, probeRequest{URL: srv.URL, Repeat: 3}, loading(loopback(), nil))
	if err != nil || len(rs) != 3 || rs[2].Status != http.StatusOK {
		t.Fatalf("three requests: %+v, %v", rs, err)
	}
	if n := loads.Swap(0); n != 1 {
		t.Errorf("three requests read the grants %d times, want once", n)
	}

	// Nothing granted: the request is refused as it is with Grants nil.
	if _, err := p.do(context.Background(), nil, probeRequest{URL: srv.URL}, loading(nil, nil)); !errors.Is(err, call.ErrNotGranted) {
		t.Errorf("no grants loaded: %v, want ErrNotGranted", err)
	}
	loads.Store(0)

	boom := errors.New("the store is down")
	if _, err := p.do(context.Background(), nil, probeRequest{URL: srv.URL}, loading(loopback(), boom)); !errors.Is(err, boom) {
		t.Errorf("a failed read: %v, want the call to fail with it", err)
	}
	loads.Store(0)

	// A secret, read twice by the guest (a sized read): the grants once.
	t.Setenv("WEFT_TEST_LOADED_SECRET", "loaded-value")
	c := call.Call{Activity: "secret", Input: []byte(`"token"`), Info: abi.Info{Plugin: "probe"}}
	loading(&grant.Set{Secrets: map[string]string{"token": "env:WEFT_TEST_LOADED_SECRET"}}, nil)(&c)
	if out, err := p.rt.Invoke(context.Background(), p.version, c); err != nil || string(out) != "12" {
		t.Fatalf("secret: %s, %v; want its length, 12", out, err)
	}
	if n := loads.Swap(0); n != 1 {
		t.Errorf("a secret read the grants %d times, want once", n)
	}

	// The kit's echo needs no grants.
	rt := testplugins.Runtime(t, plugins.Config{})
	m, err := rt.Load(context.Background(), testplugins.Bytes(t, "kit"))
	if err != nil {
		t.Fatal(err)
	}
	c = call.Call{Activity: "echo", Input: []byte(`{"a":1}`)}
	loading(loopback(), nil)(&c)
	if out, err := rt.Invoke(context.Background(), m.Version, c); err != nil || string(out) != `{"a":1}` {
		t.Fatalf("echo: %s, %v", out, err)
	}
	if n := loads.Load(); n != 0 {
		t.Errorf("echo read the grants %d times, want never", n)
	}
}
