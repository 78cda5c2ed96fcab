package main_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// token is the secret every test grants, through WEBHOOK_TEST_TOKEN.
const token = "s3cr3t-t0ken-value"

// TestWebhook runs every test of the plugin against one Runtime: wazero
// compiles the module once, which takes seconds under the race detector.
// Tests that set the environment cannot run in parallel; they set the
// token's variable once, here, before any subtest starts.
func TestWebhook(t *testing.T) {
	t.Setenv("WEBHOOK_TEST_TOKEN", token)
	t.Setenv("WEBHOOK_TEST_EMPTY_TOKEN", "")
	t.Setenv("WEBHOOK_TEST_BAD_TOKEN", token+"\nX-Injected: 1")
	p := load(t, plugins.Config{})
	t.Run("group", func(t *testing.T) {
		for _, tt := range []struct {
			name string
			test func(*testing.T, plugin)
		}{
			{"Delivers", testDelivers},
			{"Responses", testResponses},
			{"Failures", testFailures},
			{"Unreachable", testUnreachable},
			{"TLS", testTLS},
			{"Deadline", testDeadline},
			{"NotGranted", testNotGranted},
			{"Config", testConfig},
			{"Token", testToken},
			{"Echo", testEcho},
		} {
			t.Run(tt.name, func(t *testing.T) {
				t.Parallel()
				tt.test(t, p)
			})
		}
	})
}

// plugin is the webhook plugin loaded into a Runtime.
type plugin struct {
	rt      *plugins.Runtime
	version string
}

func load(t *testing.T, cfg plugins.Config) plugin {
	t.Helper()
	rt := testplugins.Runtime(t, cfg)
	return plugin{rt: rt, version: testplugins.Load(t, rt, "webhook")}
}

// grants lets the plugin post to url on any port of 127.0.0.1, with the
// token.
func grants(url string) *grant.Set {
	return &grant.Set{
		Hosts:   []grant.Host{{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}},
		Config:  map[string]string{"url": url},
		Secrets: map[string]string{"token": "env:WEBHOOK_TEST_TOKEN"},
	}
}

// result is one call: its output or error, and everything it logged.
type result struct {
	out  string
	err  error
	logs []string
}

// deliver calls deliver with input under g, as attempt 1 of the step
// execution key.
func (p plugin) deliver(ctx context.Context, g *grant.Set, input, key string) result {
	var mu sync.Mutex
	var r result
	call := call.Call{
		Activity: "deliver", Input: []byte(input), Grants: g,
		Info: abi.Info{Plugin: "webhook", Activity: "deliver", Attempt: 1, IdempotencyKey: key},
		Log: func(rec call.Record) {
			mu.Lock()
			defer mu.Unlock()
			r.logs = append(r.logs, rec.Message)
		},
	}
	out, err := p.rt.Invoke(ctx, p.version, call)
	r.out, r.err = string(out), err
	return r
}

// noToken fails the test when the token appears in r's output, error or
// logs.
func (r result) noToken(t *testing.T) {
	t.Helper()
	all := r.out + strings.Join(r.logs, "\n")
	if r.err != nil {
		all += r.err.Error()
	}
	var ge *call.GuestError
	if errors.As(r.err, &ge) {
		all += string(ge.Details)
	}
	if strings.Contains(all, token) {
		t.Errorf("the token leaked: output %s, error %v, logs %q", r.out, r.err, r.logs)
	}
}

// seen is what a test server received.
type seen struct {
	method, path, body string
	header             http.Header
}

// server answers every request with status, header and body, and sends
// what it received on the returned channel.
func server(t *testing.T, status int, header map[string]string, body string) (*httptest.Server, <-chan seen) {
	t.Helper()
	got := make(chan seen, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, string(b), r.Header.Clone()}
		for k, v := range header {
			w.Header().Set(k, v)
		}
		w.WriteHeader(status)
		io.WriteString(w, body)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

var hexKey = regexp.MustCompile(`^[0-9a-f]{32}$`)

func testDelivers(t *testing.T, p plugin) {
	srv, got := server(t, 200, map[string]string{"Content-Type": "application/json"}, `{"ok": true, "id": 7}`)
	const input = `{"event":"order.shipped","order":{"id":"A-17","items":[1,2]}}`
	r := p.deliver(context.Background(), grants(srv.URL+"/hook"), input, "instance-1/notify/1")
	r.noToken(t)
	if r.err != nil {
		t.Fatal(r.err)
	}
	if want := `{"status":200,"response_bytes":21}`; r.out != want {
		t.Errorf("output %s, want %s", r.out, want)
	}
	s := <-got
	if s.method != "POST" || s.path != "/hook" || s.body != input {
		t.Errorf("the server received %s %s %s", s.method, s.path, s.body)
	}
	if a := s.header.Get("Authorization"); a != "Bearer "+token {
		t.Errorf("Authorization %q, want the bearer token", a)
	}
	if ct := s.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	key := s.header.Get("Idempotency-Key")
	if !hexKey.MatchString(key) {
		t.Errorf("Idempotency-Key %q, want 32 lowercase hex digits", key)
	}

	// Another attempt of the same step execution sends the same key, so
	// that the receiver applies the delivery once; another execution a
	// different one.
	if r := p.deliver(context.Background(), grants(srv.URL+"/hook"), input, "instance-1/notify/1"); r.err != nil {
		t.Fatal(r.err)
	}
	if again := (<-got).header.Get("Idempotency-Key"); again != key {
		t.Errorf("a retry sent Idempotency-Key %q, the first attempt %q", again, key)
	}
	if r := p.deliver(context.Background(), grants(srv.URL+"/hook"), input, "instance-2/notify/1"); r.err != nil {
		t.Fatal(r.err)
	}
	if other := (<-got).header.Get("Idempotency-Key"); other == key {
		t.Errorf("another step execution sent the same Idempotency-Key %q", key)
	}
}

func testResponses(t *testing.T, p plugin) {
	big := strings.Repeat("x", 300<<10)
	for _, tt := range []struct {
		name   string
		status int
		body   string
		want   string
	}{
		{"json", 201, ` [1, {"a": null}] `, `{"status":201,"response_bytes":18}`},
		{"text", 202, "accepted, thanks", `{"status":202,"response_bytes":16}`},
		{"empty", 204, "", `{"status":204,"response_bytes":0}`},
		{"large", 200, big, `{"status":200,"response_bytes":307200}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := server(t, tt.status, nil, tt.body)
			r := p.deliver(context.Background(), grants(srv.URL), `{"n":1}`, "i/s/1")
			if r.err != nil {
				t.Fatal(r.err)
			}
			if r.out != tt.want {
				t.Errorf("output %.200s, want %.200s", r.out, tt.want)
			}
		})
	}
}

// guestError returns the failure the plugin reported, failing the test
// when the call failed otherwise.
func guestError(t *testing.T, err error) *call.GuestError {
	t.Helper()
	var ge *call.GuestError
	if !errors.As(err, &ge) {
		t.Fatalf("error %v, want a failure the plugin reported", err)
	}
	return ge
}

func testFailures(t *testing.T, p plugin) {
	for _, tt := range []struct {
		status    int
		header    map[string]string
		code      string
		retryable bool
		details   string
	}{
		{500, nil, "http_5xx", true, `{"body":"down","status":500}`},
		{503, map[string]string{"Retry-After": "30"}, "http_5xx", true, `{"body":"down","retry_after":"30","status":503}`},
		{429, map[string]string{"Retry-After": "5"}, "http_429", true, `{"body":"down","retry_after":"5","status":429}`},
		{400, nil, "http_4xx", false, `{"body":"down","status":400}`},
		{401, nil, "http_4xx", false, `{"body":"down","status":401}`},
		{404, nil, "http_4xx", false, `{"body":"down","status":404}`},
		{304, nil, "http_3xx", false, `{"status":304}`}, // a 304 has no body
	} {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			srv, got := server(t, tt.status, tt.header, "down")
			r := p.deliver(context.Background(), grants(srv.URL), `{}`, "i/s/1")
			r.noToken(t)
			ge := guestError(t, r.err)
			if ge.Code != tt.code || ge.Retryable != tt.retryable || string(ge.Details) != tt.details {
				t.Errorf("failure %s retryable %v details %s; want %s %v %s", ge.Code, ge.Retryable, ge.Details, tt.code, tt.retryable, tt.details)
			}
			if len(got) != 1 {
				t.Errorf("the server received %d requests, want 1: the plugin never retries by itself", len(got))
			}
		})
	}
}

func testUnreachable(t *testing.T, p plugin) {
	// A port nothing listens on: the connection is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String() + "/hook"
	l.Close()
	r := p.deliver(context.Background(), grants(url), `{}`, "i/s/1")
	ge := guestError(t, r.err)
	if ge.Code != "http_unreachable" || !ge.Retryable || string(ge.Details) != `{"error":"unreachable"}` {
		t.Errorf("failure %+v (details %s), want retryable http_unreachable", ge, ge.Details)
	}
}

func testTLS(t *testing.T, p plugin) {
	// The test server's certificate is its own, which the host does not
	// trust.
	reached := make(chan struct{}, 1)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { reached <- struct{}{} }))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // the failed handshake
	srv.StartTLS()
	t.Cleanup(srv.Close)
	g := grants(srv.URL)
	g.Hosts = []grant.Host{{Pattern: "https://127.0.0.1:*", PrivateNetworks: true}}
	r := p.deliver(context.Background(), g, `{}`, "i/s/1")
	r.noToken(t)
	ge := guestError(t, r.err)
	if ge.Code != "http_tls" || ge.Retryable {
		t.Errorf("failure %+v, want non-retryable http_tls", ge)
	}
	if len(reached) != 0 {
		t.Error("the request reached the server through a failed handshake")
	}
}

// testDeadline: a server that never answers holds the call until its
// deadline, where the host stops it; the server's answer is not waited for.
func testDeadline(t *testing.T, p plugin) {
	arrived := make(chan struct{}, 1)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	// Long enough for the request to reach the server on a loaded machine:
	// the call is stopped while it waits for the answer.
	const deadline = 5 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	start := time.Now()
	r := p.deliver(ctx, grants(srv.URL), `{}`, "i/s/1")
	took := time.Since(start)
	if !errors.Is(r.err, call.ErrTimeout) {
		t.Fatalf("error %v, want call.ErrTimeout", r.err)
	}
	// The server may see the request after the call ended, on a loaded
	// machine.
	select {
	case <-arrived:
	case <-time.After(30 * time.Second):
		t.Error("the request never reached the server")
	}
	// Promptly: not the host's 30 s request timeout, and not after the
	// server answered (it never does). The margin is for a loaded machine
	// under the race detector.
	if took > deadline+5*time.Second {
		t.Errorf("the call took %s, with a deadline of %s", took, deadline)
	}
}

func testNotGranted(t *testing.T, p plugin) {
	srv, got := server(t, 200, nil, "")
	for _, tt := range []struct {
		name   string
		grants func(*grant.Set)
		want   string
	}{
		{"another port", func(g *grant.Set) { g.Hosts = []grant.Host{{Pattern: "http://127.0.0.1:1", PrivateNetworks: true}} }, "host"},
		{"https only", func(g *grant.Set) { g.Hosts = []grant.Host{{Pattern: "127.0.0.1:*", PrivateNetworks: true}} }, "host"},
		{"no private networks", func(g *grant.Set) { g.Hosts = []grant.Host{{Pattern: "http://127.0.0.1:*"}} }, "loopback"},
		{"no hosts", func(g *grant.Set) { g.Hosts = nil }, "host"},
		{"no token", func(g *grant.Set) { g.Secrets = nil }, "token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := grants(srv.URL + "/hook")
			tt.grants(g)
			r := p.deliver(context.Background(), g, `{}`, "i/s/1")
			r.noToken(t)
			if !errors.Is(r.err, call.ErrNotGranted) || !strings.Contains(r.err.Error(), tt.want) {
				t.Errorf("error %v, want call.ErrNotGranted mentioning %q", r.err, tt.want)
			}
			var ge *call.GuestError
			if errors.As(r.err, &ge) {
				t.Errorf("the plugin reported %+v: the host should have stopped the call", ge)
			}
		})
	}
	if len(got) != 0 {
		t.Errorf("the server received %d requests", len(got))
	}
}

func testConfig(t *testing.T, p plugin) {
	for _, tt := range []struct {
		name string
		url  *string
		code string
	}{
		{"missing url", nil, "missing_url"},
		{"empty url", ptr(""), "missing_url"},
		{"not http", ptr("ftp://127.0.0.1/in"), "bad_url"},
		{"relative", ptr("/in"), "bad_url"},
		{"user information", ptr("http://user:pw@127.0.0.1/in"), "bad_url"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := grants("")
			delete(g.Config, "url")
			if tt.url != nil {
				g.Config["url"] = *tt.url
			}
			r := p.deliver(context.Background(), g, `{}`, "i/s/1")
			ge := guestError(t, r.err)
			if ge.Code != tt.code || ge.Retryable {
				t.Errorf("failure %+v, want non-retryable %s", ge, tt.code)
			}
			if tt.code == "missing_url" && !strings.Contains(ge.Message, "--config url=") {
				t.Errorf("message %q does not say how to grant a url", ge.Message)
			}
		})
	}
}

func testToken(t *testing.T, p plugin) {
	// An empty token sends no Authorization: the way to call a webhook
	// that takes none, since the token must be granted.
	srv, got := server(t, 200, nil, "")
	g := grants(srv.URL)
	g.Secrets["token"] = "env:WEBHOOK_TEST_EMPTY_TOKEN"
	if r := p.deliver(context.Background(), g, `{}`, "i/s/1"); r.err != nil {
		t.Fatal(r.err)
	}
	if a, found := (<-got).header["Authorization"]; found {
		t.Errorf("an empty token sent Authorization %q", a)
	}

	// A token that a header cannot carry fails before anything is sent,
	// without quoting it.
	g.Secrets["token"] = "env:WEBHOOK_TEST_BAD_TOKEN"
	r := p.deliver(context.Background(), g, `{}`, "i/s/1")
	r.noToken(t)
	if ge := guestError(t, r.err); ge.Code != "bad_token" || ge.Retryable {
		t.Errorf("failure %+v, want non-retryable bad_token", ge)
	}
	if len(got) != 0 {
		t.Errorf("the server received a request with a bad token")
	}
}

// testEcho: a receiver that quotes the request in its answer (its
// Authorization header, as some answer a 401) gets the token back in
// nothing the plugin returns: a 2xx's output has the status and the size
// only, and a failure's details quote the body with the token replaced.
func testEcho(t *testing.T, p plugin) {
	for _, status := range []int{200, 401} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(status)
				fmt.Fprintf(w, "refused Authorization: %s for %s", r.Header.Get("Authorization"), r.URL.Path)
			}))
			t.Cleanup(srv.Close)
			r := p.deliver(context.Background(), grants(srv.URL+"/hook"), `{}`, "i/s/1")
			r.noToken(t)
			if status == 200 {
				if r.err != nil || !strings.HasPrefix(r.out, `{"status":200,"response_bytes":`) {
					t.Errorf("output %s, error %v; want the status and the size", r.out, r.err)
				}
				return
			}
			ge := guestError(t, r.err)
			if want := `{"body":"refused Authorization: Bearer [secret] for /hook","status":401}`; string(ge.Details) != want {
				t.Errorf("details %s, want %s", ge.Details, want)
			}
		})
	}
}

// TestWebhookRequestTimeout: the host's own request timeout, shorter than
// the attempt's deadline, is a retryable http_timeout.
func TestWebhookRequestTimeout(t *testing.T) {
	t.Setenv("WEBHOOK_TEST_TOKEN", token)
	p := load(t, plugins.Config{HTTP: plugins.HTTPConfig{Timeout: 300 * time.Millisecond}})
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(func() { close(release); srv.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r := p.deliver(ctx, grants(srv.URL), `{}`, "i/s/1")
	ge := guestError(t, r.err)
	if ge.Code != "http_timeout" || !ge.Retryable || string(ge.Details) != `{"error":"timeout"}` {
		t.Errorf("failure %+v (details %s), want retryable http_timeout", ge, ge.Details)
	}
	if !strings.Contains(strings.Join(r.logs, "\n"), "timeout") {
		t.Errorf("the host logged no reason: %q", r.logs)
	}
}

// TestManifestNeeds: the plugin declares the config key and the secret it
// reads.
func TestManifestNeeds(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	m, err := rt.Load(context.Background(), testplugins.Bytes(t, "webhook"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(m.Needs)
	if want := `{"config":["url"],"secrets":["token"]}`; string(b) != want {
		t.Errorf("needs %s, want %s", b, want)
	}
	if len(m.Activities) != 1 || m.Activities[0].Name != "deliver" {
		t.Errorf("activities %+v", m.Activities)
	}
}

func ptr[T any](v T) *T { return &v }
