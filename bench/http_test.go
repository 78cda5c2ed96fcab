package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	extism "github.com/extism/go-sdk"
	"github.com/tetratelabs/wazero"

	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobfile"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// httpBatch is how many requests one plugin call makes: the benchmark
// measures the cost of a request, not of the call around it.
const httpBatch = 32

// httpBody is the request body: a small JSON document.
var httpBody = []byte(`{"event":"order.paid","order":"A-1042","amount":4200,"currency":"EUR"}`)

// postFunc makes n POST requests of httpBody and returns how many were
// answered 200.
type postFunc func(n int) (int, error)

// httpHosts are the contenders of the HTTP benchmarks: net/http, then
// Weft through its Go SDK and through its Rust SDK, then Extism, then Weft
// through the bare import from Go and from C, then the Go SDK's, the bare
// import's from Go and from C on a bare wazero host that forwards the
// import to net/http (bareHTTP).
var httpHosts = []struct {
	host  string
	setup func(*testing.B, string) postFunc
}{
	{"net-http", setupNetHTTP},
	{"weft", weftHTTP("post")},
	{"weft-rust", setupWeftRustHTTP},
	{"extism", setupExtismHTTP},
	{"weft-raw", weftHTTP("raw")},
	{"weft-c", setupWeftCHTTP},
	{"bare-go", func(b *testing.B, url string) postFunc {
		httpPlugins(b)
		return setupBareHTTP(b, url, httpcallWasm, "post", jsonPostInput)
	}},
	{"bare-raw", func(b *testing.B, url string) postFunc {
		httpPlugins(b)
		return setupBareHTTP(b, url, httpcallWasm, "raw", jsonPostInput)
	}},
	{"bare-c", func(b *testing.B, url string) postFunc {
		return setupBareHTTP(b, url, cPlugin(b, "chttp"), "post", cPostInput)
	}},
}

// BenchmarkHTTP compares one outbound POST of a small body to a loopback
// server: made by Go's net/http directly (what a native Go worker does), by
// a Weft plugin through http_request, with every hop checked against its
// grants and every address after resolution, and by an Extism plugin
// through Extism's http_request with allowed_hosts; and, to tell the
// host's cost from the guest's, the Weft plugins' guests on a bare wazero
// host that forwards the import to net/http. An op is one request; plugins
// make httpBatch requests per call.
func BenchmarkHTTP(b *testing.B) {
	srv := hookServer(b)
	for _, c := range httpHosts {
		b.Run("host="+c.host, func(b *testing.B) {
			post := c.setup(b, srv.URL+"/hook")
			if ok, err := post(2); err != nil || ok != 2 {
				b.Fatalf("check: %d answered 200, %v", ok, err)
			}
			cpu := startCPU()
			b.ResetTimer()
			for i := 0; i < b.N; i += httpBatch {
				n := min(httpBatch, b.N-i)
				if ok, err := post(n); err != nil || ok != n {
					b.Fatalf("%d of %d answered 200, %v", ok, n, err)
				}
			}
			b.StopTimer()
			cpu.report(b)
		})
	}
}

// BenchmarkHTTPCall is one plugin call that makes one request, the whole
// path an activity with a single request takes, with its latency's median
// (p50-ns) beside the mean.
func BenchmarkHTTPCall(b *testing.B) {
	srv := hookServer(b)
	for _, c := range httpHosts {
		if c.host == "extism" || strings.HasPrefix(c.host, "bare-") || c.host == "weft-raw" {
			continue // Extism's call, and the contenders that take a host or a guest apart, are not the subject here
		}
		b.Run("host="+c.host, func(b *testing.B) {
			post := c.setup(b, srv.URL+"/hook")
			lat := make([]time.Duration, 0, b.N)
			cpu := startCPU()
			b.ResetTimer()
			for b.Loop() {
				start := time.Now()
				if ok, err := post(1); err != nil || ok != 1 {
					b.Fatal(ok, err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			cpu.report(b)
			slices.Sort(lat)
			if len(lat) > 0 {
				b.ReportMetric(float64(lat[len(lat)/2]), "p50-ns")
			}
		})
	}
}

// hookServer is the receiving end: a loopback server that reads the body
// and answers 200 with none.
func hookServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

func setupNetHTTP(b *testing.B, url string) postFunc {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 32}}
	b.Cleanup(client.CloseIdleConnections)
	return func(n int) (int, error) {
		ok := 0
		for range n {
			resp, err := client.Post(url, "application/json", bytes.NewReader(httpBody))
			if err != nil {
				return ok, err
			}
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return ok, err
			}
			if resp.StatusCode == 200 {
				ok++
			}
		}
		return ok, nil
	}
}

var (
	httpcallOnce   sync.Once
	httpcallWasm   []byte
	httpcallErr    error
	extismHTTPWasm []byte

	rusthttpOnce sync.Once
	rusthttpWasm []byte
	rusthttpErr  error

	chttpOnce sync.Once
	chttpWasm []byte
	chttpErr  error
)

func httpPlugins(b *testing.B) {
	httpcallOnce.Do(func() {
		if httpcallWasm, httpcallErr = buildPlugin("httpcall", "httpcall.wasm"); httpcallErr == nil {
			extismHTTPWasm, httpcallErr = buildPlugin(filepath.Join("extism", "httpcall"), "extism-httpcall.wasm")
		}
	})
	if httpcallErr != nil {
		b.Fatal(httpcallErr)
	}
}

// weftHTTP is the Weft contender whose requests the httpcall plugin's
// activity makes.
func weftHTTP(activity string) func(*testing.B, string) postFunc {
	return func(b *testing.B, url string) postFunc {
		httpPlugins(b)
		return setupWeftHTTP(b, url, httpcallWasm, activity, jsonPostInput)
	}
}

// setupWeftRustHTTP is the Weft contender whose requests the rusthttp
// plugin makes through the Rust SDK, as a Rust author's plugin would. It
// needs Debian's Rust toolchain (make deps), and is skipped without it.
func setupWeftRustHTTP(b *testing.B, url string) postFunc {
	rusthttpOnce.Do(func() { rusthttpWasm, rusthttpErr = buildRustPlugin("rusthttp") })
	if errors.Is(rusthttpErr, errNoCargo) {
		b.Skip(rusthttpErr)
	}
	if rusthttpErr != nil {
		b.Fatal(rusthttpErr)
	}
	return setupWeftHTTP(b, url, rusthttpWasm, "post", jsonPostInput)
}

// setupWeftCHTTP is the Weft contender whose requests the chttp plugin
// makes through the bare import from C: a guest with no runtime, so what it
// adds to net/http is the host's. It needs clang (make deps), and is
// skipped without it.
func setupWeftCHTTP(b *testing.B, url string) postFunc {
	return setupWeftHTTP(b, url, cPlugin(b, "chttp"), "post", cPostInput)
}

// cPlugin builds the C plugin in dir once, and skips b without clang.
func cPlugin(b *testing.B, dir string) []byte {
	chttpOnce.Do(func() { chttpWasm, chttpErr = buildCPlugin(dir) })
	if errors.Is(chttpErr, errNoClang) {
		b.Skip(chttpErr)
	}
	if chttpErr != nil {
		b.Fatal(chttpErr)
	}
	return chttpWasm
}

// cPostInput is the input of chttp's post: n, the URL and the body, a line
// each.
func cPostInput(url string, n int) ([]byte, error) {
	return fmt.Appendf(nil, "%d\n%s\n%s", n, url, httpBody), nil
}

// jsonPostInput is the input of the Go and Rust contenders' activities.
func jsonPostInput(url string, n int) ([]byte, error) {
	return json.Marshal(map[string]any{"url": url, "body": string(httpBody), "n": n})
}

// setupWeftHTTP runs activity of the plugin wasm with the input encode
// makes of the URL and the number of requests.
func setupWeftHTTP(b *testing.B, url string, wasm []byte, activity string, encode func(url string, n int) ([]byte, error)) postFunc {
	blobs, err := blobfile.New(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	rt, err := plugins.New(ctx, plugins.Config{CacheDir: cacheDir, Logger: slog.New(slog.DiscardHandler), HTTP: plugins.HTTPConfig{MaxRequests: 1 << 20}}, blobs)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = rt.Close(ctx) })
	m, err := rt.Load(ctx, wasm)
	if err != nil {
		b.Fatal(err)
	}
	// Parsed, as the engine's grants are: Allow then matches without
	// parsing the rule again at every hop.
	g, err := grant.Parse([]byte(`{"hosts":[{"pattern":"http://127.0.0.1:*","private_networks":true}]}`))
	if err != nil {
		b.Fatal(err)
	}
	return func(n int) (int, error) {
		in, err := encode(url, n)
		if err != nil {
			return 0, err
		}
		out, err := rt.Invoke(ctx, m.Version, call.Call{Activity: activity, Input: in, Grants: g})
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(string(out))
	}
}

func setupExtismHTTP(b *testing.B, url string) postFunc {
	httpPlugins(b)
	ctx := context.Background()
	plugin := func(n int) *extism.Plugin {
		manifest := extism.Manifest{
			Wasm:         []extism.Wasm{extism.WasmData{Data: extismHTTPWasm}},
			AllowedHosts: []string{"127.0.0.1"},
			Config:       map[string]string{"url": url, "n": strconv.Itoa(n)},
		}
		p, err := extism.NewPlugin(ctx, manifest, extism.PluginConfig{EnableWasi: true, RuntimeConfig: wazero.NewRuntimeConfig().WithCompilationCache(cache)}, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = p.Close(ctx) })
		return p
	}
	// The batch size is configuration: one plugin per size used.
	byN := map[int]*extism.Plugin{}
	return func(n int) (int, error) {
		p := byN[n]
		if p == nil {
			p = plugin(n)
			byN[n] = p
		}
		rc, out, err := p.CallWithContext(ctx, "post", httpBody)
		if err == nil && rc != 0 {
			err = fmt.Errorf("extism: post returned %d", rc)
		}
		if err != nil {
			return 0, err
		}
		return strconv.Atoi(string(out))
	}
}

// BenchmarkHTTPInterleaved runs the contenders of BenchmarkHTTP in turn, a
// batch of httpBatch requests each, for b.N rounds, and reports each one's
// wall and CPU time per request and its ratio to net/http's. On a shared
// machine the speed drifts by tens of percent within seconds; contenders
// measured one after the other see different machines, and their ratios
// swing with the drift (BenchmarkHTTP's per-round ratios spread 1.0–1.5×
// for one contender). Interleaved, every contender sees the same drift,
// and the ratio is what is left. The order rotates every round, so that
// no contender always follows the same one.
//
//	go test -run '^$' -bench HTTPInterleaved -benchtime 400x
func BenchmarkHTTPInterleaved(b *testing.B) {
	srv := hookServer(b)
	type contender struct {
		name      string
		post      postFunc
		wall, cpu time.Duration
		n         int
	}
	var cs []*contender
	for _, c := range httpHosts {
		if c.host == "extism" {
			continue // 3-4x: not what this benchmark tells apart
		}
		post := c.setup(b, srv.URL+"/hook")
		if ok, err := post(httpBatch); err != nil || ok != httpBatch {
			b.Fatalf("%s: check: %d of %d answered 200, %v", c.host, ok, httpBatch, err)
		}
		cs = append(cs, &contender{name: c.host, post: post})
	}
	if len(cs) == 0 || cs[0].name != "net-http" {
		b.Fatal("no net/http contender to compare with")
	}
	b.ResetTimer()
	for round := 0; round < b.N; round++ {
		for i := range cs {
			c := cs[(round+i)%len(cs)]
			cpu0, _ := processCPU()
			start := time.Now()
			if ok, err := c.post(httpBatch); err != nil || ok != httpBatch {
				b.Fatalf("%s: %d of %d answered 200, %v", c.name, ok, httpBatch, err)
			}
			c.wall += time.Since(start)
			cpu1, _ := processCPU()
			c.cpu += cpu1 - cpu0
			c.n += httpBatch
		}
	}
	b.StopTimer()
	base := cs[0]
	for _, c := range cs {
		wall := float64(c.wall) / float64(c.n)
		cpu := float64(c.cpu) / float64(c.n)
		b.ReportMetric(wall, c.name+"-ns/req")
		b.ReportMetric(cpu, c.name+"-cpu-ns/req")
		if c != base {
			b.ReportMetric(float64(c.wall)/float64(base.wall), c.name+"-x")
			b.ReportMetric(float64(c.cpu)/float64(base.cpu), c.name+"-cpu-x")
		}
	}
}
