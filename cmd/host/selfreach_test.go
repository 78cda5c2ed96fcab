package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/testplugins"
)

// TestPluginsNeverReachTheHost: a plugin granted every loopback and
// private address, on every port, asks the host's own API to grant it a
// file as a secret, at every address the host listens on: 127.0.0.1, ::1,
// localhost, the machine's other addresses (for a host listening on all of
// them), and through redirects from a loopback server. Each request is
// refused as not_granted, naming the host's own listener, on a host
// without tokens and on one with them (where the plugin even carries the
// admin token); the grants are unchanged afterwards. Through a proxy,
// which the dialer cannot see, the host without tokens refuses the
// plugin's request: it never counts as a local caller.
func TestPluginsNeverReachTheHost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	t.Parallel()
	bin := buildWeft(t)
	wasm, err := os.ReadFile(testplugins.Testdata(t, "plugins/testdata/httpprobe"))
	if err != nil {
		t.Fatal(err)
	}
	const adminToken = "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name  string
		args  []string
		token string
		// others: the machine's non-loopback addresses reach the host.
		others bool
	}{
		{name: "without tokens", args: []string{"--listen", "127.0.0.1:0"}},
		{name: "with tokens, on every address", args: []string{"--listen", ":0", "--set", "auth.tokens=ci:admin:" + adminToken}, token: adminToken, others: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"--data-dir", t.TempDir(), "--set", "plugins.cache_dir=" + testplugins.CacheDir(t)}, tc.args...)
			p := startProcess(t, bin, args...)
			go drain(p)
			ap, err := netip.ParseAddrPort(p.addr)
			if err != nil {
				t.Fatal(err)
			}
			port := ap.Port()
			c, err := client.New(client.Config{Server: fmt.Sprintf("http://127.0.0.1:%d", port), Token: tc.token})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, _, err := c.PutPlugin(ctx, "probe", wasm); err != nil {
				t.Fatal(err)
			}
			broad := apiv1.GrantDocument{Hosts: []apiv1.GrantHost{
				{Pattern: "http://*:*", PrivateNetworks: true},
				{Pattern: "http://127.0.0.1:*", PrivateNetworks: true},
				{Pattern: "http://[::1]:*", PrivateNetworks: true},
				{Pattern: "http://localhost:*", PrivateNetworks: true},
			}}
			before, err := c.PutGrants(ctx, "probe", broad)
			if err != nil {
				t.Fatal(err)
			}
			wf := "name: reach\nsteps: [ { id: s, activity: probe.do, input: \"${ input }\", timeout: 1m, retry: { max_attempts: 1 }, output: r } ]\noutput: \"${ vars.r }\"\n"
			if _, _, err := c.PutWorkflow(ctx, "reach", []byte(wf)); err != nil {
				t.Fatal(err)
			}

			// What the plugin sends: grant itself a file as a secret.
			const path = "/v1/plugins/probe/grants"
			headers := "Content-Type: application/json\n"
			if tc.token != "" {
				headers += "Authorization: Bearer " + tc.token + "\n"
			}
			body := `{"hosts":[{"pattern":"http://*:*","private_networks":true}],"secrets":{"token":"file:/etc/hostname"}}`
			reach := func(t *testing.T, target string) *apiv1.Instance {
				t.Helper()
				in, err := json.Marshal(map[string]string{"method": "PUT", "url": target, "headers": headers, "body": body})
				if err != nil {
					t.Fatal(err)
				}
				inst, _, err := c.Start(ctx, "reach", apiv1.StartRequest{Input: in}, 2*time.Minute)
				if err != nil {
					t.Fatal(err)
				}
				return inst
			}
			refused := func(t *testing.T, target string) {
				t.Helper()
				inst := reach(t, target)
				if inst.Status != apiv1.StatusFailed || inst.Error == nil || inst.Error.Code != "not_granted" ||
					!strings.Contains(inst.Error.Message, "the host's own listener") {
					t.Errorf("%s: %s %s %+v; want failed as not_granted, naming the host's own listener", target, inst.Status, inst.Output, inst.Error)
				}
			}

			targets := []string{
				fmt.Sprintf("http://127.0.0.1:%d%s", port, path),
				fmt.Sprintf("http://[::1]:%d%s", port, path),
				fmt.Sprintf("http://localhost:%d%s", port, path),
				fmt.Sprintf("http://[::ffff:127.0.0.1]:%d%s", port, path),
			}
			if tc.others {
				addrs, err := net.InterfaceAddrs()
				if err != nil {
					t.Fatal(err)
				}
				for _, ia := range addrs {
					n, ok := ia.(*net.IPNet)
					if !ok {
						continue
					}
					a, ok := netip.AddrFromSlice(n.IP)
					// A link-local IPv6 address needs its zone, which no
					// grant pattern names.
					if !ok || a.Unmap().IsLoopback() || a.Is6() && a.IsLinkLocalUnicast() {
						continue
					}
					targets = append(targets, "http://"+netip.AddrPortFrom(a.Unmap(), port).String()+path)
				}
				if len(targets) == 4 {
					t.Log("this machine has no non-loopback address to try")
				}
			}
			// Redirects from a loopback server the grants allow: 302 (the
			// client follows with the same method) and 307 (with the body
			// too).
			redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				code, _ := strconv.Atoi(r.URL.Query().Get("code"))
				http.Redirect(w, r, r.URL.Query().Get("to"), code)
			}))
			t.Cleanup(redirect.Close)
			for _, code := range []string{"302", "307"} {
				targets = append(targets, redirect.URL+"/?code="+code+"&to="+url.QueryEscape(targets[0]))
			}
			for _, target := range targets {
				refused(t, target)
			}

			if tc.token == "" {
				// A proxy on loopback, which the dialer allows, in front of
				// the API: the host without tokens refuses what a plugin
				// sent, by the header the runtime sets on it.
				api, err := url.Parse(fmt.Sprintf("http://127.0.0.1:%d", port))
				if err != nil {
					t.Fatal(err)
				}
				proxy := httptest.NewServer(httputil.NewSingleHostReverseProxy(api))
				t.Cleanup(proxy.Close)
				inst := reach(t, proxy.URL+path)
				var out []struct {
					Status int    `json:"status"`
					Body   string `json:"body"`
				}
				if inst.Status != apiv1.StatusCompleted || json.Unmarshal(inst.Output, &out) != nil || len(out) != 1 || out[0].Status != http.StatusForbidden {
					t.Errorf("through a proxy: %s %s %+v; want the API's 403", inst.Status, inst.Output, inst.Error)
				}
			}

			after, err := c.Grants(ctx, "probe")
			if err != nil {
				t.Fatal(err)
			}
			if after.Revision != before.Revision || len(after.Secrets) != 0 || len(after.Hosts) != len(broad.Hosts) {
				t.Errorf("the grants changed: %+v, were %+v", after, before)
			}
		})
	}
}
