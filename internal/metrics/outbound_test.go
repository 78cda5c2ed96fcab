package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/metrics"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// TestPluginHTTPSeriesAreBounded: a plugin under a wildcard rule that asks
// for many distinct hosts makes one series per rule, not one per host; a
// request no rule allowed is labelled none.
func TestPluginHTTPSeriesAreBounded(t *testing.T) {
	t.Parallel()
	m, reg := newMetrics(t)
	rt := testplugins.Runtime(t, plugins.Config{Logger: slog.New(slog.DiscardHandler)})
	wasm, err := os.ReadFile(testplugins.Testdata(t, "plugins/testdata/httpprobe"))
	if err != nil {
		t.Fatal(err)
	}
	man, err := rt.Load(context.Background(), wasm)
	if err != nil {
		t.Fatal(err)
	}
	inv := metrics.Plugins(m, rt)
	// A port nothing listens on: each request fails fast as unreachable,
	// and is counted all the same.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	wildcard := &grant.Set{Hosts: []grant.Host{{Pattern: "http://*:*", PrivateNetworks: true}}}
	invoke := func(g *grant.Set, url string) error {
		t.Helper()
		in, err := json.Marshal(map[string]string{"url": url})
		if err != nil {
			t.Fatal(err)
		}
		_, err = inv.Invoke(context.Background(), man.Version, call.Call{Activity: "do", Input: in, Grants: g,
			Info: abi.Info{Plugin: "probe", IdempotencyKey: "i/s/1"}})
		return err
	}
	const hosts = 40
	for i := range hosts {
		// Unreachable: the guest sees -2 and completes.
		if err := invoke(wildcard, fmt.Sprintf("http://127.0.0.%d:%d/", 2+i, port+i%7)); err != nil {
			t.Fatal(err)
		}
	}
	if err := invoke(&grant.Set{}, fmt.Sprintf("http://127.0.0.1:%d/", port)); !errors.Is(err, call.ErrNotGranted) {
		t.Fatalf("without grants: %v, want not_granted", err)
	}

	if n := testutil.CollectAndCount(reg, "weft_plugin_http_requests_total"); n != 2 {
		t.Errorf("%d series of weft_plugin_http_requests_total for %d hosts under one rule and one refusal; want 2", n, hosts)
	}
	if n := testutil.CollectAndCount(reg, "weft_plugin_http_request_duration_seconds"); n != 2 {
		t.Errorf("%d series of weft_plugin_http_request_duration_seconds; want 2", n)
	}
	if v := value(t, reg, "weft_plugin_http_requests_total", "plugin", "probe", "rule", "http://*:*", "code", "unreachable"); v != hosts {
		t.Errorf("requests under the rule = %v, want %d", v, hosts)
	}
	if v := value(t, reg, "weft_plugin_http_requests_total", "plugin", "probe", "rule", metrics.NoRule, "code", "not_granted"); v != 1 {
		t.Errorf("requests no rule allowed = %v, want 1", v)
	}
}
