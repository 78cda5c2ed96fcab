package plugins_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
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

type probeRequest struct {
	Method  string `json:"method,omitempty"`
	URL     string `json:"url"`
	Headers string `json:"headers,omitempty"`
	Body    string `json:"body,omitempty"`
	Repeat  int    `json:"repeat,omitempty"`
}

type probeResponse struct {
	Status  int32  `json:"status"`
	Headers string `json:"headers"`
	Body    string `json:"body"`
	Missing bool   `json:"missing"`
}

// httpProbe is a runtime with the httpprobe test plugin loaded.
type httpProbe struct {
	rt      *plugins.Runtime
	version string
}

func newHTTPProbe(t *testing.T, cfg plugins.Config) *httpProbe {
	t.Helper()
	rt := testplugins.Runtime(t, cfg)
	return &httpProbe{rt: rt, version: loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/httpprobe"))}
}

// do runs the probe's "do" activity under grants.
func (p *httpProbe) do(ctx context.Context, g *grant.Set, req probeRequest, opts ...func(*call.Call)) ([]probeResponse, error) {
	in, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	call := call.Call{Activity: "do", Input: in, Grants: g,
		Info: abi.Info{Plugin: "probe", IdempotencyKey: "instance-1/step/1"}}
	for _, o := range opts {
		o(&call)
	}
	out, err := p.rt.Invoke(ctx, p.version, call)
	if err != nil {
		return nil, err
	}
	var rs []probeResponse
	if err := json.Unmarshal(out, &rs); err != nil {
		return nil, fmt.Errorf("output %s: %w", out, err)
	}
	return rs, nil
}

// loopback grants plain HTTP to every port of 127.0.0.1.
func loopback() *grant.Set {
	return &grant.Set{Hosts: []grant.Host{{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}}}
}

func hostPort(t *testing.T, srv *httptest.Server) (host, port string) {
	t.Helper()
	h, p, err := net.SplitHostPort(strings.TrimPrefix(strings.TrimPrefix(srv.URL, "http://"), "https://"))
	if err != nil {
		t.Fatal(err)
	}
	return h, p
}

func TestHTTPRoundTrip(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, path, query, body string
		header                    http.Header
	}
	got := make(chan seen, 4)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- seen{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Clone()}
		w.Header().Add("X-Zeta", "z")
		w.Header().Add("X-Alpha", "a1")
		w.Header().Add("X-Alpha", "a2")
		w.WriteHeader(201)
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	p := newHTTPProbe(t, plugins.Config{})

	var recs []call.Request
	rs, err := p.do(context.Background(), loopback(), probeRequest{
		Method: "POST", URL: srv.URL + "/hooks/in?token=s3cr3t", Body: `{"n":1}`,
		Headers: "Content-Type: application/json\r\nX-Multi: 1\nX-Multi: 2\n  X-Bad-Indent: x",
	}, func(c *call.Call) { c.Requested = func(r call.Request) { recs = append(recs, r) } })
	if err == nil {
		t.Fatalf("a header line with a name that is not a token was accepted: %+v", rs)
	}
	if !errors.Is(err, call.ErrProtocol) {
		t.Fatalf("bad header line: %v, want an ABI violation", err)
	}

	rs, err = p.do(context.Background(), loopback(), probeRequest{
		Method: "POST", URL: srv.URL + "/hooks/in?token=s3cr3t", Body: `{"n":1}`,
		Headers: "Content-Type: application/json\r\n\nX-Multi: 1\nX-Multi: 2\n",
	}, func(c *call.Call) { c.Requested = func(r call.Request) { recs = append(recs, r) } })
	if err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.method != "POST" || s.path != "/hooks/in" || s.query != "token=s3cr3t" || s.body != `{"n":1}` {
		t.Errorf("server saw %s %s?%s %q", s.method, s.path, s.query, s.body)
	}
	if ct := s.header.Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type %q", ct)
	}
	if m := s.header.Values("X-Multi"); len(m) != 2 || m[0] != "1" || m[1] != "2" {
		t.Errorf("X-Multi %q, want both values in order", m)
	}
	if ua := s.header.Get("User-Agent"); ua != "weft-plugin/1 (probe)" {
		t.Errorf("User-Agent %q", ua)
	}
	if k := s.header.Get("Idempotency-Key"); len(k) != 32 {
		t.Errorf("Idempotency-Key %q, want 32 hex digits", k)
	}
	if s.header.Get("Accept-Encoding") != "" {
		t.Errorf("the host asked for compression: %q", s.header.Get("Accept-Encoding"))
	}
	r := rs[0]
	if r.Status != 201 || r.Body != `{"ok":true}` || r.Missing {
		t.Errorf("response %+v", r)
	}
	if !strings.HasPrefix(r.Headers, "Content-Length: 11\nContent-Type: ") || !strings.Contains(r.Headers, "\nX-Alpha: a1\nX-Alpha: a2\nX-Zeta: z\n") {
		t.Errorf("response headers not sorted lines with every value:\n%s", r.Headers)
	}
	if len(recs) != 1 {
		t.Fatalf("records %+v", recs)
	}
	rec := recs[0]
	if rec.Method != "POST" || rec.Path != "/hooks/in" || rec.Status != 201 || rec.Sent != 7 || rec.Received != 11 || rec.Duration <= 0 {
		t.Errorf("record %+v", rec)
	}
	if b, _ := json.Marshal(rec); strings.Contains(string(b), "s3cr3t") {
		t.Errorf("the record carries the query: %s", b)
	}
}

func TestHTTPIdempotencyKeys(t *testing.T) {
	t.Parallel()
	keys := make(chan string, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		keys <- r.Header.Get("Idempotency-Key")
	}))
	t.Cleanup(srv.Close)
	p := newHTTPProbe(t, plugins.Config{})
	for attempt := 1; attempt <= 2; attempt++ {
		if _, err := p.do(context.Background(), loopback(), probeRequest{URL: srv.URL, Repeat: 2}); err != nil {
			t.Fatal(err)
		}
	}
	a1, a2, b1, b2 := <-keys, <-keys, <-keys, <-keys
	if a1 != b1 || a2 != b2 {
		t.Errorf("keys differ between attempts: %s %s, then %s %s", a1, a2, b1, b2)
	}
	if a1 == a2 {
		t.Errorf("two requests of one call share key %s", a1)
	}
	// A key the guest sets is sent as it is.
	if _, err := p.do(context.Background(), loopback(), probeRequest{URL: srv.URL, Headers: "Idempotency-Key: mine"}); err != nil {
		t.Fatal(err)
	}
	if k := <-keys; k != "mine" {
		t.Errorf("the guest's key was replaced by %q", k)
	}
	// Another step execution: other keys.
	if _, err := p.do(context.Background(), loopback(), probeRequest{URL: srv.URL}, func(c *call.Call) { c.Info.IdempotencyKey = "instance-1/step/2" }); err != nil {
		t.Fatal(err)
	}
	if k := <-keys; k == a1 {
		t.Errorf("another step execution got the same key %s", k)
	}
}

// TestHTTPGrantMatrix runs every kind of request the grants must refuse, or
// allow, against real servers on loopback.
func TestHTTPGrantMatrix(t *testing.T) {
	t.Parallel()
	hits := make(chan string, 64)
	handler := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			hits <- name
			fmt.Fprint(w, name)
		})
	}
	a := httptest.NewServer(handler("a"))
	t.Cleanup(a.Close)
	b := httptest.NewServer(handler("b"))
	t.Cleanup(b.Close)
	_, aPort := hostPort(t, a)
	_, bPort := hostPort(t, b)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits <- "redirect"
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	}))
	t.Cleanup(redirect.Close)
	_, rPort := hostPort(t, redirect)
	p := newHTTPProbe(t, plugins.Config{})

	rule := func(pattern string, private bool) grant.Host {
		return grant.Host{Pattern: pattern, PrivateNetworks: private}
	}
	for _, tc := range []struct {
		name  string
		hosts []grant.Host
		url   string
		want  string // the server that answers, or "" for not_granted
		why   string // in the error, when refused
	}{
		{"allowed host and port", []grant.Host{rule("http://127.0.0.1:"+aPort, true)}, a.URL, "a", ""},
		{"any port", []grant.Host{rule("http://127.0.0.1:*", true)}, b.URL, "b", ""},
		{"nothing granted", nil, a.URL, "", "--host http://127.0.0.1:" + aPort + " --private-networks"},
		{"another port", []grant.Host{rule("http://127.0.0.1:"+aPort, true)}, b.URL, "", "127.0.0.1:" + bPort},
		{"https only unless the rule says http", []grant.Host{rule("127.0.0.1:*", true)}, a.URL, "", "http://127.0.0.1:" + aPort},
		{"a name, not the IP literal", []grant.Host{rule("http://localhost:*", true)}, a.URL, "", "127.0.0.1"},
		{"the name granted", []grant.Host{rule("http://localhost:*", true)}, "http://localhost:" + aPort, "a", ""},
		{"a glob does not match the name itself", []grant.Host{rule("http://*.localhost:*", true)}, "http://localhost:" + aPort, "", "localhost"},
		{"a name that resolves to loopback, without private networks", []grant.Host{rule("http://localhost:*", false)}, "http://localhost:" + aPort, "", "loopback"},
		{"an IP literal on loopback, without private networks", []grant.Host{rule("http://*:*", false)}, a.URL, "", "loopback"},
		{"the metadata address, even with private networks", []grant.Host{rule("http://169.254.169.254", true)}, "http://169.254.169.254/latest/meta-data/", "", "metadata"},
		{"the metadata address mapped into IPv6", []grant.Host{rule("http://*", true)}, "http://[::ffff:169.254.169.254]/", "", "metadata"},
		{"a redirect to a granted host", []grant.Host{rule("http://127.0.0.1:*", true)}, redirect.URL + "/?to=" + b.URL, "b", ""},
		{"a redirect to a host not granted", []grant.Host{rule("http://127.0.0.1:"+rPort, true)}, redirect.URL + "/?to=" + b.URL, "", "127.0.0.1:" + bPort},
		{"a redirect to the metadata address", []grant.Host{rule("http://127.0.0.1:"+rPort, true), rule("http://*", true)}, redirect.URL + "/?to=http://169.254.169.254/", "", "metadata"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := p.do(context.Background(), &grant.Set{Hosts: tc.hosts}, probeRequest{URL: tc.url})
			if tc.want != "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				if rs[0].Status != 200 || rs[0].Body != tc.want {
					t.Fatalf("got %+v, want %s to answer", rs[0], tc.want)
				}
				drain(hits, tc.want)
				return
			}
			t.Log(err)
			var ge *call.GrantError
			if !errors.Is(err, call.ErrNotGranted) || !errors.As(err, &ge) {
				t.Fatalf("got %+v, %v; want not_granted", rs, err)
			}
			if !strings.Contains(err.Error(), tc.why) || !strings.Contains(err.Error(), "plugin probe") {
				t.Errorf("%v; want it to name %q and the plugin", err, tc.why)
			}
			// Nothing but the redirecting server was reached.
			for {
				select {
				case h := <-hits:
					if h != "redirect" {
						t.Errorf("server %s was reached", h)
					}
					continue
				default:
				}
				break
			}
		})
	}
}

// TestHTTPGrantSuggestion: the command a refusal suggests grants what
// the request needs, --private-networks only for a private address.
func TestHTTPGrantSuggestion(t *testing.T) {
	t.Parallel()
	p := newHTTPProbe(t, plugins.Config{})
	for _, tc := range []struct{ url, want string }{
		{"http://127.0.0.1:8080/", "weft plugin grant probe --host http://127.0.0.1:8080 --private-networks"},
		{"http://localhost:8080/", "weft plugin grant probe --host http://localhost:8080 --private-networks"},
		{"http://10.1.2.3/", "weft plugin grant probe --host http://10.1.2.3 --private-networks"},
		{"https://192.0.2.1/", "weft plugin grant probe --host 192.0.2.1"},
		{"https://api.example.com/", "weft plugin grant probe --host api.example.com"},
		// Addresses no grant reaches: no suggestion, and the reason.
		{"http://0.0.0.0:8080/", ""},
		{"http://[::]:8080/", ""},
		{"http://169.254.169.254/", ""},
	} {
		_, err := p.do(context.Background(), &grant.Set{}, probeRequest{URL: tc.url})
		var ge *call.GrantError
		if !errors.As(err, &ge) || ge.Grant != tc.want {
			t.Errorf("%s: %v; want the suggestion %q", tc.url, err, tc.want)
		}
		if tc.want == "" && (err == nil || !strings.Contains(err.Error(), "never reach")) {
			t.Errorf("%s: %v; want it to say plugins never reach it", tc.url, err)
		}
	}
}

// drain takes the hits of one allowed request.
func drain(hits chan string, last string) {
	for h := range hits {
		if h == last {
			return
		}
	}
}

func TestHTTPNoResponse(t *testing.T) {
	t.Parallel()
	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	ln.Close()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	notHTTP, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { notHTTP.Close() })
	go func() {
		for {
			c, err := notHTTP.Accept()
			if err != nil {
				return
			}
			fmt.Fprint(c, "SSH-2.0-OpenSSH\r\n\r\n")
			c.Close()
		}
	}()
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "tls") }))
	t.Cleanup(tlsSrv.Close)
	_, tlsPort := hostPort(t, tlsSrv)

	oddStatus, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { oddStatus.Close() })
	go func() {
		for {
			c, err := oddStatus.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 4096)
				_, _ = c.Read(buf)
				fmt.Fprint(c, "HTTP/1.1 999 Odd\r\nContent-Length: 0\r\n\r\n")
			}()
		}
	}()

	// Only the slow server's case waits for the request's own timeout;
	// the others get the default, so that a TLS handshake on a loaded
	// machine is not taken for a timeout.
	p := newHTTPProbe(t, plugins.Config{})
	short := newHTTPProbe(t, plugins.Config{HTTP: plugins.HTTPConfig{Timeout: 300 * time.Millisecond}})
	var logs []call.Record
	var mu sync.Mutex
	logTo := func(c *call.Call) {
		c.Log = func(r call.Record) { mu.Lock(); logs = append(logs, r); mu.Unlock() }
	}
	g := &grant.Set{Hosts: []grant.Host{{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}, {Pattern: "127.0.0.1:" + tlsPort, PrivateNetworks: true}}}
	for _, tc := range []struct {
		name string
		url  string
		want abi.HTTPError
	}{
		{"refused", closed, abi.HTTPUnreachable},
		{"the request's own timeout", slow.URL, abi.HTTPTimeout},
		{"not HTTP", "http://" + notHTTP.Addr().String(), abi.HTTPBadResponse},
		{"an untrusted certificate", "https://127.0.0.1:" + tlsPort, abi.HTTPTLS},
		{"a status that is not one", "http://" + oddStatus.Addr().String(), abi.HTTPBadResponse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			probe := p
			if tc.want == abi.HTTPTimeout {
				probe = short
			}
			rs, err := probe.do(context.Background(), g, probeRequest{URL: tc.url + "/x?key=hidden"}, logTo)
			if err != nil {
				t.Fatal(err)
			}
			if rs[0].Status != tc.want || !rs[0].Missing {
				t.Errorf("got %+v, want %d and no response to read", rs[0], tc.want)
			}
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(logs) != 5 {
		t.Fatalf("%d log records, want one per failed request: %+v", len(logs), logs)
	}
	for _, r := range logs {
		if r.Source != "http" || r.Level != slog.LevelWarn || strings.Contains(r.Message, "hidden") || !strings.Contains(r.Message, "/x") {
			t.Errorf("record %+v: want an http warning naming the path, never the query", r)
		}
	}

	// The same TLS server, trusted.
	pool := x509.NewCertPool()
	pool.AddCert(tlsSrv.Certificate())
	trusted := newHTTPProbe(t, plugins.Config{HTTP: plugins.HTTPConfig{RootCAs: pool}})
	rs, err := trusted.do(context.Background(), g, probeRequest{URL: "https://127.0.0.1:" + tlsPort})
	if err != nil || rs[0].Status != 200 || rs[0].Body != "tls" {
		t.Errorf("trusted TLS server: %+v, %v", rs, err)
	}
}

func TestHTTPStopsTheGuest(t *testing.T) {
	t.Parallel()
	hang := make(chan struct{})
	t.Cleanup(func() { close(hang) })
	entered := make(chan struct{}, 4)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		select {
		case <-hang:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(slow.Close)
	p := newHTTPProbe(t, plugins.Config{CancelGrace: 50 * time.Millisecond})

	t.Run("deadline", func(t *testing.T) {
		// Long enough for the request to reach the server on a loaded
		// machine: the guest is stopped while it waits for the answer.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, err := p.do(ctx, loopback(), probeRequest{URL: slow.URL})
		if !errors.Is(err, call.ErrTimeout) {
			t.Fatalf("%v, want the guest stopped at its deadline", err)
		}
		select {
		case <-entered:
		case <-time.After(30 * time.Second):
			t.Fatal("the request never reached the server")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		hb := call.NewHeartbeat(time.Now())
		go func() {
			<-entered // the request is in flight
			hb.RequestCancel()
		}()
		// No deadline: only the cancellation can end the call, and the
		// server never answers.
		_, err := p.do(context.Background(), loopback(), probeRequest{URL: slow.URL}, func(c *call.Call) { c.Heartbeat = hb })
		if !errors.Is(err, call.ErrCancelled) {
			t.Fatalf("%v, want the guest stopped after the grace period", err)
		}
	})
}

func TestHTTPLimits(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			w.Write(make([]byte, 2048))
		case "/chunked": // no Content-Length: the limit is found while reading
			for range 4 {
				w.Write(make([]byte, 512))
				w.(http.Flusher).Flush()
			}
		case "/headers":
			for i := range 20 {
				w.Header().Add(fmt.Sprintf("X-H%d", i), "v")
			}
		case "/hugeheader": // one header of 10 MiB
			w.Header().Set("X-Huge", strings.Repeat("h", 10<<20))
		case "/manyheaders": // 10,000 header lines
			for i := range 10000 {
				w.Header().Add(fmt.Sprintf("X-H%d", i), "v")
			}
		}
	}))
	t.Cleanup(srv.Close)
	p := newHTTPProbe(t, plugins.Config{HTTP: plugins.HTTPConfig{
		MaxResponseBytes: 1024, MaxRequestBytes: 100, MaxHeaders: 10, MaxRequests: 3,
	}})
	for _, tc := range []struct {
		name    string
		req     probeRequest
		setting string
		kind    error
	}{
		{"response body", probeRequest{URL: srv.URL + "/big"}, "plugins.http.max_response_bytes", call.ErrLimit},
		{"response body without a length", probeRequest{URL: srv.URL + "/chunked"}, "plugins.http.max_response_bytes", call.ErrLimit},
		{"response headers", probeRequest{URL: srv.URL + "/headers"}, "plugins.http.max_headers", call.ErrLimit},
		{"a response header over the bytes", probeRequest{URL: srv.URL + "/hugeheader"}, "plugins.http.max_header_bytes", call.ErrLimit},
		{"response headers over the bytes", probeRequest{URL: srv.URL + "/manyheaders"}, "plugins.http.max_header_bytes", call.ErrLimit},
		{"request body", probeRequest{Method: "POST", URL: srv.URL, Body: strings.Repeat("x", 101)}, "plugins.http.max_request_bytes", call.ErrLimit},
		{"request headers", probeRequest{URL: srv.URL, Headers: strings.Repeat("X-A: 1\n", 11)}, "plugins.http.max_headers", call.ErrLimit},
		{"requests per call", probeRequest{URL: srv.URL, Repeat: 4}, "plugins.http.max_requests", call.ErrLimit},
		{"a header the host sets", probeRequest{URL: srv.URL, Headers: "Host: evil.example"}, "set by the host", call.ErrProtocol},
		{"a header value with CR", probeRequest{URL: srv.URL, Headers: "X-A: 1\rX-B: 2"}, "control character '\\r'", call.ErrProtocol},
		{"a header value with another control character", probeRequest{URL: srv.URL, Headers: "X-A: 1\x01"}, "control character", call.ErrProtocol},
		{"a bad method", probeRequest{Method: "GET /", URL: srv.URL}, "method", call.ErrProtocol},
		{"user information", probeRequest{URL: strings.Replace(srv.URL, "//", "//u:secret=1@", 1)}, "user information", call.ErrProtocol},
		{"another scheme", probeRequest{URL: "ftp://127.0.0.1/?secret=1"}, "not http or https", call.ErrProtocol},
		{"a relative URL", probeRequest{URL: "/path?secret=1"}, "absolute URL", call.ErrProtocol},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs, err := p.do(context.Background(), loopback(), tc.req)
			if !errors.Is(err, tc.kind) || !strings.Contains(err.Error(), tc.setting) {
				t.Fatalf("%+v, %v; want %v naming %q", rs, err, tc.kind, tc.setting)
			}
			if strings.Contains(err.Error(), "secret=1") {
				t.Errorf("the error quotes the query: %v", err)
			}
		})
	}
}

func TestSecrets(t *testing.T) {
	// Not parallel: t.Setenv.
	t.Setenv("WEFT_TEST_SECRET", "hunter2-value")
	p := newHTTPProbe(t, plugins.Config{})
	run := func(g *grant.Set, name string) ([]call.Record, []byte, error) {
		var logs []call.Record
		in, _ := json.Marshal(name)
		out, err := p.rt.Invoke(context.Background(), p.version, call.Call{Activity: "secret", Input: in, Grants: g,
			Info: abi.Info{Plugin: "probe"}, Log: func(r call.Record) { logs = append(logs, r) }})
		return logs, out, err
	}
	granted := &grant.Set{Secrets: map[string]string{"token": "env:WEFT_TEST_SECRET", "gone": "env:WEFT_TEST_UNSET", "file": "file:/nonexistent/weft"}}
	logs, out, err := run(granted, "token")
	if err != nil || string(out) != "13" {
		t.Fatalf("granted secret: %s, %v; want its length, 13", out, err)
	}
	if len(logs) != 1 || logs[0].Message != "the secret is [secret]" {
		t.Errorf("logs %+v: want the value masked", logs)
	}
	_, _, err = run(granted, "other")
	if !errors.Is(err, call.ErrNotGranted) || !strings.Contains(err.Error(), `secret "other"`) || !strings.Contains(err.Error(), "weft plugin grant probe --secret") {
		t.Errorf("a secret not granted: %v", err)
	}
	for _, name := range []string{"gone", "file"} {
		_, _, err = run(granted, name)
		if !errors.Is(err, call.ErrSecret) || errors.Is(err, call.ErrNotGranted) {
			t.Errorf("secret %s that does not resolve: %v, want ErrSecret", name, err)
		}
	}
	_, _, err = run(nil, "token")
	if !errors.Is(err, call.ErrNotGranted) {
		t.Errorf("no grants at all: %v", err)
	}
}

// Credentials follow a redirect only to the same origin: scheme, host and
// port.
func TestHTTPRedirectDropsCredentials(t *testing.T) {
	t.Parallel()
	auth := make(chan string, 4)
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth <- r.Header.Get("Authorization")
	}))
	t.Cleanup(target.Close)
	var self string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/same" {
			auth <- r.Header.Get("Authorization")
			return
		}
		to := target.URL
		if r.URL.Query().Get("same") != "" {
			to = self + "/same"
		}
		http.Redirect(w, r, to, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(origin.Close)
	self = origin.URL
	p := newHTTPProbe(t, plugins.Config{})
	for _, tc := range []struct {
		query, want string
	}{{"?same=1", "Bearer tok"}, {"", ""}} {
		rs, err := p.do(context.Background(), loopback(), probeRequest{URL: origin.URL + "/" + tc.query, Headers: "Authorization: Bearer tok"})
		if err != nil || rs[0].Status != 200 {
			t.Fatalf("%+v, %v", rs, err)
		}
		if got := <-auth; got != tc.want {
			t.Errorf("redirect %q: Authorization %q arrived, want %q", tc.query, got, tc.want)
		}
	}
}

// TestHTTPWaitIsASignOfLife: a guest waiting for an answer cannot
// heartbeat, yet is not hung: while the request is in flight the attempt's
// last sign of life is now, and the call's end is one.
func TestHTTPWaitIsASignOfLife(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) time.Time { mu.Lock(); defer mu.Unlock(); now = now.Add(d); return now }
	entered, release := make(chan struct{}, 1), make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
		io.WriteString(w, "ok")
	}))
	t.Cleanup(srv.Close)
	p := newHTTPProbe(t, plugins.Config{Now: clock})
	hb := call.NewHeartbeat(time.Time{})
	done := make(chan error, 1)
	go func() {
		_, err := p.do(context.Background(), loopback(), probeRequest{URL: srv.URL}, func(c *call.Call) { c.Heartbeat = hb })
		done <- err
	}()
	select {
	case <-entered:
	case err := <-done:
		t.Fatalf("the call ended before its request arrived: %v", err)
	}
	waiting := advance(time.Hour)
	if _, at, beats := hb.Last(); !at.Equal(waiting) || beats != 0 {
		t.Errorf("while the request waits: last sign of life %s (%d beats), want now, %s", at, beats, waiting)
	}
	ended := advance(time.Minute)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	advance(time.Hour)
	if _, at, _ := hb.Last(); !at.Equal(ended) {
		t.Errorf("after the call: last sign of life %s, want its end, %s", at, ended)
	}
}

// TestOutputMasksSecrets: an output that carries a secret the guest read
// is returned with the value masked, written plainly or escaped in a JSON
// string; one that masking would leave without a JSON document is
// withheld.
func TestOutputMasksSecrets(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string]string{"plain": "hunter2-value", "quoted": `pa"ss\word`, "digits": "12345678"}
	secrets := map[string]string{}
	for name, v := range files {
		f := filepath.Join(dir, name)
		if err := os.WriteFile(f, []byte(v), 0o600); err != nil {
			t.Fatal(err)
		}
		secrets[name] = "file:" + f
	}
	p := newHTTPProbe(t, plugins.Config{})
	for _, tc := range []struct {
		name string
		raw  bool
		want string
	}{
		{"plain", false, `{"value":"[secret]"}`},
		{"quoted", false, `{"value":"[secret]"}`},
		{"digits", true, `"[withheld: the output held a secret the activity read]"`},
	} {
		in, _ := json.Marshal(map[string]any{"name": tc.name, "raw": tc.raw})
		out, err := p.rt.Invoke(context.Background(), p.version, call.Call{Activity: "reveal", Input: in, Grants: &grant.Set{Secrets: secrets},
			Info: abi.Info{Plugin: "probe"}})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(out) != tc.want {
			t.Errorf("%s: returned %s, want %s", tc.name, out, tc.want)
		}
	}
}

// TestHTTPRecordsAreBounded: a request's record keeps at most the stated
// bytes of its method, host and path, and a call's records the first
// MaxRecords, then one that says the rest were dropped.
func TestHTTPRecordsAreBounded(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	t.Cleanup(srv.Close)
	p := newHTTPProbe(t, plugins.Config{Logger: slog.New(slog.DiscardHandler), HTTP: plugins.HTTPConfig{MaxRequests: 2 * plugins.MaxRecords}})
	keep := func(recs *[]call.Request) func(*call.Call) {
		return func(c *call.Call) { c.Requested = func(r call.Request) { *recs = append(*recs, r) } }
	}

	// A megabyte of path, and a megabyte of method, three times each.
	long := strings.Repeat("p", 1<<20)
	var recs []call.Request
	for _, req := range []probeRequest{
		{URL: srv.URL + "/" + long, Repeat: 3},
		{Method: strings.Repeat("M", 1<<20), URL: srv.URL + "/m", Repeat: 3},
	} {
		if _, err := p.do(context.Background(), loopback(), req, keep(&recs)); err != nil {
			t.Fatal(err)
		}
	}
	if len(recs) != 6 {
		t.Fatalf("%d records, want 6", len(recs))
	}
	for i, r := range recs {
		if len(r.Method) > plugins.MaxRecordMethodBytes || len(r.Host) > plugins.MaxRecordHostBytes || len(r.Path) > plugins.MaxRecordPathBytes || !r.Truncated {
			t.Errorf("record %d: method %d bytes, host %d, path %d, truncated %v; want at most %d, %d, %d and truncated",
				i, len(r.Method), len(r.Host), len(r.Path), r.Truncated, plugins.MaxRecordMethodBytes, plugins.MaxRecordHostBytes, plugins.MaxRecordPathBytes)
		}
	}
	if !strings.HasPrefix(long, strings.TrimPrefix(recs[0].Path, "/")) || recs[3].Method != strings.Repeat("M", plugins.MaxRecordMethodBytes) {
		t.Errorf("record 0's path %.20q…, record 3's method %.20q…: want the values' beginnings", recs[0].Path, recs[3].Method)
	}

	// More requests than are recorded: the first MaxRecords, then one
	// that says so.
	recs = nil
	if _, err := p.do(context.Background(), loopback(), probeRequest{URL: srv.URL + "/many", Repeat: plugins.MaxRecords + 5}, keep(&recs)); err != nil {
		t.Fatal(err)
	}
	if len(recs) != plugins.MaxRecords+1 {
		t.Fatalf("%d records of %d requests, want %d", len(recs), plugins.MaxRecords+5, plugins.MaxRecords+1)
	}
	if last := recs[plugins.MaxRecords]; last.Error != "dropped" || last.Path != "" || recs[plugins.MaxRecords-1].Path != "/many" {
		t.Errorf("the last records %+v, %+v; want a request and then the dropped marker", recs[plugins.MaxRecords-1], last)
	}
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d records: %d bytes of JSON", len(recs), len(b))
}

// TestHTTPNeverReachesTheHostsListener: an address the host listens on is
// refused under the broadest grant, by any name or address that reaches
// it and through a redirect, naming the host's own listener; a wildcard
// listener's port is refused on every address of the machine. Other ports
// stay reachable.
func TestHTTPNeverReachesTheHostsListener(t *testing.T) {
	t.Parallel()
	ok := func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "reached") }
	own := httptest.NewServer(http.HandlerFunc(ok))
	t.Cleanup(own.Close)
	wild := httptest.NewServer(http.HandlerFunc(ok)) // stands for a listener on [::]
	t.Cleanup(wild.Close)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if to := r.URL.Query().Get("to"); to != "" {
			http.Redirect(w, r, to, http.StatusTemporaryRedirect)
			return
		}
		fmt.Fprint(w, "other")
	}))
	t.Cleanup(other.Close)
	_, ownPort := hostPort(t, own)
	_, wildPort := hostPort(t, wild)
	p := newHTTPProbe(t, plugins.Config{Logger: slog.New(slog.DiscardHandler)})
	if err := p.rt.ProtectListener(own.Listener.Addr()); err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(wildPort)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.rt.ProtectListener(&net.TCPAddr{IP: net.IPv6unspecified, Port: port}); err != nil {
		t.Fatal(err)
	}
	broad := &grant.Set{Hosts: []grant.Host{{Pattern: "http://*:*", PrivateNetworks: true}}}

	targets := []string{
		own.URL, "http://localhost:" + ownPort, "http://[::1]:" + ownPort, "http://[::ffff:127.0.0.1]:" + ownPort,
		"http://127.0.0.2:" + ownPort, other.URL + "/?to=" + url.QueryEscape(own.URL),
		wild.URL, "http://localhost:" + wildPort,
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, ia := range addrs {
		if n, ok := ia.(*net.IPNet); ok {
			if a, ok := netip.AddrFromSlice(n.IP); ok && !a.Unmap().IsLoopback() && !(a.Is6() && a.IsLinkLocalUnicast()) {
				targets = append(targets, "http://"+netip.AddrPortFrom(a.Unmap(), uint16(port)).String()+"/")
			}
		}
	}
	for _, target := range targets {
		rs, err := p.do(context.Background(), broad, probeRequest{URL: target})
		var ge *call.GrantError
		if !errors.As(err, &ge) || !strings.Contains(err.Error(), "the host's own listener") || ge.Grant != "" {
			t.Errorf("%s: %+v, %v; want not_granted naming the host's own listener, with no grant to suggest", target, rs, err)
		}
	}
	if rs, err := p.do(context.Background(), broad, probeRequest{URL: other.URL}); err != nil || rs[0].Body != "other" {
		t.Errorf("another port: %+v, %v; want it reached", rs, err)
	}
}
