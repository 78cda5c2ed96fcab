package sdk

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/weftworks/weft/abi"
)

// ok answers every request with 200, no header lines and no body.
func ok(fakeRequest) (int32, string, string) { return 200, "", "" }

func TestCanonicalHeaderKey(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"content-type":     "Content-Type",
		"CONTENT-TYPE":     "Content-Type",
		"Content-Type":     "Content-Type",
		"x-request-id":     "X-Request-Id",
		"idempotency-key":  "Idempotency-Key",
		"te":               "Te",
		"www-authenticate": "Www-Authenticate",
		"x--double":        "X--Double",
		"-leading":         "-Leading",
		"a1-b2":            "A1-B2",
		"":                 "",
		"has space":        "has space", // not a token: unchanged, as net/textproto
		"bad:colon":        "bad:colon",
		"ünïcode":          "ünïcode",
	} {
		if got := CanonicalHeaderKey(in); got != want {
			t.Errorf("CanonicalHeaderKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestHeader(t *testing.T) {
	t.Parallel()
	h := Header{}
	h.Set("content-type", "text/plain")
	h.Set("Content-Type", "application/json") // replaces
	h.Add("x-tag", "a")
	h.Add("X-TAG", "b")
	want := Header{"Content-Type": {"application/json"}, "X-Tag": {"a", "b"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("header %v, want %v", h, want)
	}
	if got := h.Get("CONTENT-type"); got != "application/json" {
		t.Errorf("Get = %q", got)
	}
	if got := h.Values("x-tag"); !reflect.DeepEqual(got, []string{"a", "b"}) {
		t.Errorf("Values = %q", got)
	}
	if got := h.Get("missing"); got != "" {
		t.Errorf("Get(missing) = %q", got)
	}
	h.Del("x-TAG")
	if _, found := h["X-Tag"]; found || len(h) != 1 {
		t.Errorf("after Del: %v", h)
	}
	var none Header
	if none.Get("x") != "" || none.Values("x") != nil {
		t.Error("a nil Header should read as empty")
	}
}

func TestDoSendsTheRequest(t *testing.T) {
	t.Parallel()
	h := &fakeHost{serve: func(fakeRequest) (int32, string, string) {
		return 201, "Content-Type: application/json\r\nSet-Cookie: a=1\nSet-Cookie: b=2\nx-odd :  spaced \t\n\nno colon line\n:empty name\nLast: no newline", `{"id":7}`
	}}
	ctx := &Context{host: h}
	req := &Request{
		URL:    "https://api.example.com/v1/items?q=a%20b",
		Header: Header{},
		Body:   []byte(`{"name":"x"}`),
	}
	req.Header.Set("content-type", "application/json")
	req.Header.Add("X-Multi", "1")
	req.Header.Add("X-Multi", " 2 ")
	req.Header["authorization"] = []string{"Bearer t"} // set directly: sent as written
	req.Header["X-Empty"] = []string{""}
	req.Header["X-None"] = nil // no values: no line
	resp, err := ctx.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	wantReq := fakeRequest{
		method: "GET", // empty means GET
		url:    "https://api.example.com/v1/items?q=a%20b",
		header: "Content-Type: application/json\nX-Empty: \nX-Multi: 1\nX-Multi:  2 \nauthorization: Bearer t\n",
		body:   `{"name":"x"}`,
	}
	if len(h.reqs) != 1 || h.reqs[0] != wantReq {
		t.Fatalf("requests %+v\nwant %+v", h.reqs, wantReq)
	}
	if resp.StatusCode != 201 || string(resp.Body) != `{"id":7}` {
		t.Errorf("response %d %s", resp.StatusCode, resp.Body)
	}
	wantHeader := Header{
		"Content-Type": {"application/json"},
		"Set-Cookie":   {"a=1", "b=2"},
		"X-Odd":        {"spaced"},
		"Last":         {"no newline"},
	}
	if !reflect.DeepEqual(resp.Header(), wantHeader) {
		t.Errorf("response header %q\nwant %q", resp.Header(), wantHeader)
	}
}

func TestGetAndPost(t *testing.T) {
	t.Parallel()
	h := &fakeHost{serve: ok}
	ctx := &Context{host: h}
	if _, err := ctx.Get("http://10.0.0.7:8080/health"); err != nil {
		t.Fatal(err)
	}
	if _, err := ctx.Post("https://hooks.example.com/in", "application/json", []byte(`[1]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := ctx.Post("https://hooks.example.com/in", "", nil); err != nil {
		t.Fatal(err)
	}
	want := []fakeRequest{
		{method: "GET", url: "http://10.0.0.7:8080/health"},
		{method: "POST", url: "https://hooks.example.com/in", header: "Content-Type: application/json\n", body: "[1]"},
		{method: "POST", url: "https://hooks.example.com/in"},
	}
	if !reflect.DeepEqual(h.reqs, want) {
		t.Errorf("requests %+v\nwant %+v", h.reqs, want)
	}
}

// TestDoRefusesWhatTheABIForbids: each request would be an ABI violation
// (the host would stop the call); Do returns an error instead and never
// calls the host.
func TestDoRefusesWhatTheABIForbids(t *testing.T) {
	t.Parallel()
	const u = "https://api.example.com/"
	tests := []struct {
		name string
		req  *Request
		want string
	}{
		{"nil request", nil, "nil request"},
		{"method with a space", &Request{Method: "GE T", URL: u}, `method "GE T"`},
		{"method with a newline", &Request{Method: "GET\n", URL: u}, "method"},
		{"empty URL", &Request{URL: ""}, "scheme"},
		{"relative URL", &Request{URL: "/path"}, "scheme"},
		{"ftp", &Request{URL: "ftp://example.com/f"}, "scheme"},
		{"no host", &Request{URL: "http:///path"}, "no host"},
		{"port only", &Request{URL: "http://:80/"}, "no host"},
		{"opaque", &Request{URL: "http:example.com"}, "no host"},
		{"scheme alone", &Request{URL: "http"}, "no host"},
		{"httpss", &Request{URL: "httpss://example.com/"}, "scheme"},
		{"unclosed bracket", &Request{URL: "https://[::1/"}, "no host"},
		{"empty brackets", &Request{URL: "http://[]:80/"}, "no host"},
		{"user information after a port", &Request{URL: "http://a:1@b/"}, "user information"},
		{"user information", &Request{URL: "https://user:pw@example.com/"}, "user information"},
		{"unparsable with a secret", &Request{URL: "https://example.com:abc/hook?key=SECRET"}, "does not parse"},
		{"space", &Request{URL: "https://example.com/a b"}, "percent-encode"},
		{"non-ASCII name", &Request{URL: "https://bücher.example/"}, "punycode"},
		{"control byte", &Request{URL: "https://example.com/\x7f"}, "percent-encode"},
		{"bad port", &Request{URL: "https://example.com:http/"}, "invalid port"},
		{"name with a space", &Request{URL: u, Header: Header{"X Y": {"1"}}}, `"X Y" is not an HTTP token`},
		{"name with a colon", &Request{URL: u, Header: Header{"X:": {"1"}}}, "not an HTTP token"},
		{"empty name", &Request{URL: u, Header: Header{"": {"1"}}}, "not an HTTP token"},
		{"non-ASCII header name", &Request{URL: u, Header: Header{"Ünï": {"1"}}}, "not an HTTP token"},
		{"CR in a value", &Request{URL: u, Header: Header{"X-A": {"a\rb"}}}, `'\r' at 1`},
		{"another control byte", &Request{URL: u, Header: Header{"Authorization": {"Bearer \x01secret"}}}, `'\x01' at 7`},
		{"DEL", &Request{URL: u, Header: Header{"X-A": {"\x7f"}}}, `'\x7f' at 0`},
		{"LF in a value", &Request{URL: u, Header: Header{"X-A": {"ok", "a\nInjected: 1"}}}, `'\n' at 1`},
		{"NUL in a value", &Request{URL: u, Header: Header{"X-A": {"\x00"}}}, `'\x00' at 0`},
		{"Host", &Request{URL: u, Header: Header{"Host": {"evil"}}}, "the host's to set"},
		{"host in lower case", &Request{URL: u, Header: Header{"host": {"evil"}}}, "the host's to set"},
		{"Content-Length", &Request{URL: u, Header: Header{"Content-Length": {"1"}}}, "the host's to set"},
		{"Transfer-Encoding", &Request{URL: u, Header: Header{"TRANSFER-ENCODING": {"chunked"}}}, "the host's to set"},
		{"Connection", &Request{URL: u, Header: Header{"Connection": {"close"}}}, "the host's to set"},
		{"Keep-Alive", &Request{URL: u, Header: Header{"Keep-Alive": {"1"}}}, "the host's to set"},
		{"Upgrade", &Request{URL: u, Header: Header{"Upgrade": {"h2c"}}}, "the host's to set"},
		{"TE", &Request{URL: u, Header: Header{"TE": {"trailers"}}}, "the host's to set"},
		{"Trailer", &Request{URL: u, Header: Header{"Trailer": {"X"}}}, "the host's to set"},
		{"Proxy-Authorization", &Request{URL: u, Header: Header{"Proxy-Authorization": {"x"}}}, "the host's to set"},
		{"any Proxy-", &Request{URL: u, Header: Header{"proxy-whatever": {"x"}}}, "the host's to set"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := &fakeHost{serve: ok}
			_, err := (&Context{host: h}).Do(tt.req)
			if !errors.Is(err, ErrInvalidRequest) || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want ErrInvalidRequest mentioning %q", err, tt.want)
			}
			if err != nil && tt.req != nil && len(tt.req.URL) > 12 && strings.Contains(err.Error(), tt.req.URL) {
				t.Errorf("error %v quotes the URL, which may hold a credential", err)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("error %v quotes a header value", err)
			}
			if len(h.reqs) != 0 {
				t.Errorf("the host was called: %+v", h.reqs)
			}
		})
	}
}

// TestDoAllows checks requests at the edges of what the ABI allows.
func TestDoAllows(t *testing.T) {
	t.Parallel()
	for _, req := range []*Request{
		{Method: "PATCH", URL: "http://127.0.0.1:8080/a?b=c#frag"},
		{Method: "M-SEARCH", URL: "https://[fd12::7]:8443/"},
		{URL: "HTTPS://Example.COM"},
		{URL: "http://h?q=a:b@c"},
		{URL: "https://[::1]"},
		{URL: "https://xn--bcher-kva.example/", Header: Header{"User-Agent": {"mine/1"}, "Idempotency-Key": {"k"}, "X-Proxy": {"not a Proxy- header"}}},
		{URL: "https://example.com/", Header: Header{"X-Tab": {"a\tb"}, "X-Utf8": {"héllo"}, "!#$%&'*+-.^_`|~": {"token chars"}}},
	} {
		h := &fakeHost{serve: ok}
		if _, err := (&Context{host: h}).Do(req); err != nil {
			t.Errorf("%+v: %v", req, err)
		}
		if len(h.reqs) != 1 {
			t.Errorf("%+v: %d requests", req, len(h.reqs))
		}
	}
}

// TestDoReadsInTwoCallsAtMost: each part of a response is read with a
// call that asks its length and, unless it is empty, a call with a buffer
// of exactly that length.
func TestDoReadsInTwoCallsAtMost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                 string
		header, body         int
		wantHeader, wantBody []int
	}{
		{"empty", 0, 0, []int{0}, []int{0}},
		{"small", 30, 10, []int{0, 30}, []int{0, 10}},
		{"large", 60 << 10, 4 << 20, []int{0, 60 << 10}, []int{0, 4 << 20}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var header string
			if tt.header > 0 {
				header = "X: " + strings.Repeat("h", tt.header-4) + "\n"
			}
			body := strings.Repeat("b", tt.body)
			h := &fakeHost{serve: func(fakeRequest) (int32, string, string) { return 200, header, body }}
			resp, err := (&Context{host: h}).Get("https://example.com/")
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(h.headerCaps, tt.wantHeader) || !reflect.DeepEqual(h.bodyCaps, tt.wantBody) {
				t.Errorf("buffers: headers %v, body %v; want %v, %v", h.headerCaps, h.bodyCaps, tt.wantHeader, tt.wantBody)
			}
			if string(resp.Body) != body || resp.Body == nil {
				t.Errorf("body of %d bytes (nil: %v), want %d", len(resp.Body), resp.Body == nil, len(body))
			}
			if tt.header > 0 && len(resp.Header().Get("X")) != tt.header-4 {
				t.Errorf("header value of %d bytes, want %d", len(resp.Header().Get("X")), tt.header-4)
			}
		})
	}
}

func TestSized(t *testing.T) {
	t.Parallel()
	// A value that grows between the two calls cannot be read.
	n := int32(10)
	var caps []int
	_, found := sized(func(buf []byte) int32 { caps = append(caps, len(buf)); n++; return n })
	if found || !reflect.DeepEqual(caps, []int{0, 11}) {
		t.Errorf("growing value: found %v after buffers %v", found, caps)
	}
	// One that shrinks is read at its new length.
	n = 10
	b, found := sized(func(buf []byte) int32 {
		if int(n) <= len(buf) {
			copy(buf, "0123456789")
		}
		n--
		return n + 1
	})
	if !found || string(b) != "012345678" {
		t.Errorf("shrinking value: %q, %v", b, found)
	}
	if _, found := sized(func([]byte) int32 { return abi.NotFound }); found {
		t.Error("-1 should be no value")
	}
	// An empty value is found, not nil, and read in one call.
	caps = nil
	if b, found := sized(func(buf []byte) int32 { caps = append(caps, len(buf)); return 0 }); !found || b == nil || len(caps) != 1 {
		t.Errorf("empty value: %q, %v after buffers %v", b, found, caps)
	}
}

// TestDecodeHeaderValuesAreTheirOwn: the values of a decoded header share
// an array, and appending to one must not overwrite another.
func TestDecodeHeaderValuesAreTheirOwn(t *testing.T) {
	t.Parallel()
	h := decodeHeader([]byte("A: 1\nB: 2\nA: 3\nC: 4\n"))
	h.Add("B", "added")
	want := Header{"A": {"1", "3"}, "B": {"2", "added"}, "C": {"4"}}
	if !reflect.DeepEqual(h, want) {
		t.Errorf("got %q, want %q", h, want)
	}
}

// TestDoErrors: a negative result is an *HTTPError that errors.Is matches
// against its sentinel only, and the response is not read.
func TestDoErrors(t *testing.T) {
	t.Parallel()
	sentinels := []error{ErrHTTPTimeout, ErrHTTPUnreachable, ErrHTTPTLS, ErrHTTPBadResponse}
	tests := []struct {
		code    int32
		want    error
		reason  string
		timeout bool
	}{
		{abi.HTTPTimeout, ErrHTTPTimeout, "timeout", true},
		{abi.HTTPUnreachable, ErrHTTPUnreachable, "unreachable", false},
		{abi.HTTPTLS, ErrHTTPTLS, "tls", false},
		{abi.HTTPBadResponse, ErrHTTPBadResponse, "bad_response", false},
		{-9, nil, "unknown", false},
	}
	for _, tt := range tests {
		h := &fakeHost{serve: func(fakeRequest) (int32, string, string) { return tt.code, "", "" }}
		resp, err := (&Context{host: h}).Post("https://example.com/", "text/plain", []byte("x"))
		if resp != nil {
			t.Errorf("%d: a response with an error", tt.code)
		}
		var he *HTTPError
		if !errors.As(err, &he) {
			t.Fatalf("%d: error %v, want an *HTTPError", tt.code, err)
		}
		if he.Code != tt.code || he.Reason != tt.reason || he.Timeout() != tt.timeout {
			t.Errorf("%d: %+v, Timeout %v; want reason %q, Timeout %v", tt.code, he, he.Timeout(), tt.reason, tt.timeout)
		}
		if !strings.HasPrefix(err.Error(), "http: "+tt.reason) {
			t.Errorf("%d: message %q", tt.code, err)
		}
		for _, s := range sentinels {
			if errors.Is(err, s) != (s == tt.want) {
				t.Errorf("%d: errors.Is(%v, %v) = %v", tt.code, err, s, !(s == tt.want))
			}
		}
		if errors.Is(err, ErrInvalidRequest) {
			t.Errorf("%d: matches ErrInvalidRequest", tt.code)
		}
		if len(h.headerCaps)+len(h.bodyCaps) != 0 {
			t.Errorf("%d: read a response after an error", tt.code)
		}
		if tt.want != nil && he == tt.want {
			t.Errorf("%d: Do returned the sentinel itself, which a caller could change", tt.code)
		}
	}
}

// TestStatusesAreNotErrors: any status is a response, as in net/http.
func TestStatusesAreNotErrors(t *testing.T) {
	t.Parallel()
	for _, status := range []int32{100, 204, 304, 404, 429, 500, 599} {
		h := &fakeHost{serve: func(fakeRequest) (int32, string, string) { return status, "Retry-After: 3\n", "why" }}
		resp, err := (&Context{host: h}).Get("https://example.com/")
		if err != nil || resp.StatusCode != int(status) || resp.Header().Get("retry-after") != "3" || string(resp.Body) != "why" {
			t.Errorf("%d: %+v, %v", status, resp, err)
		}
	}
}

// TestDoBrokenHost: a host that breaks the ABI's promises gives an error,
// not a made-up response.
func TestDoBrokenHost(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		host  *brokenHost
		wants string
	}{
		{"status out of range", &brokenHost{status: 600}, "neither a status nor an error"},
		{"no headers", &brokenHost{status: 200, header: -1}, "no response to read"},
		{"no body", &brokenHost{status: 200, body: -1}, "no response to read"},
		{"a body that grows", &brokenHost{status: 200, grow: true}, "changed while it was read"},
	} {
		tt.host.fakeHost.serve = func(fakeRequest) (int32, string, string) { return tt.host.status, "", "" }
		_, err := (&Context{host: tt.host}).Get("https://example.com/")
		if err == nil || !strings.Contains(err.Error(), tt.wants) {
			t.Errorf("%s: error %v, want one mentioning %q", tt.name, err, tt.wants)
		}
	}
}

// brokenHost answers with status and returns header and body (when
// negative) from the response functions; with grow, a body one byte longer
// at each call.
type brokenHost struct {
	fakeHost
	status       int32
	header, body int32
	grow         bool
}

func (h *brokenHost) httpResponseHeaders(buf []byte) int32 {
	if h.header < 0 {
		return h.header
	}
	return h.fakeHost.httpResponseHeaders(buf)
}

func (h *brokenHost) httpResponseBody(buf []byte) int32 {
	if h.body < 0 {
		return h.body
	}
	if h.grow {
		h.body++
		return h.body
	}
	return h.fakeHost.httpResponseBody(buf)
}

func TestSecret(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("s", 300)
	h := &fakeHost{secrets: map[string]string{"short": "hunter2", "long": long, "empty": ""}}
	ctx := &Context{host: h}
	if got := ctx.Secret("short"); got != "hunter2" {
		t.Errorf("short: %q", got)
	}
	if got := ctx.Secret("long"); got != long {
		t.Errorf("long: %d bytes", len(got))
	}
	if got := ctx.Secret("empty"); got != "" {
		t.Errorf("empty: %q", got)
	}
	if want := []int{0, 7, 0, 300, 0}; !reflect.DeepEqual(h.secretCaps, want) {
		t.Errorf("buffers %v, want %v", h.secretCaps, want)
	}
}

// FuzzHeaderRoundTrip: whatever header appendHeader accepts decodes to the
// same names (canonical) and values (trimmed), and each of its lines is one
// the ABI allows.
func FuzzHeaderRoundTrip(f *testing.F) {
	f.Add("Content-Type", "application/json", "x-b", " two words ")
	f.Add("a", "", "A", "same name")
	f.Add("X", "\t", "Y", "é")
	f.Add("Host", "x", "x y", "z")
	f.Fuzz(func(t *testing.T, n1, v1, n2, v2 string) {
		h := Header{n1: {v1}}
		h[n2] = append(h[n2], v2)
		b, err := appendHeader([]byte("Kept: before\n"), h)
		if err != nil {
			if !errors.Is(err, ErrInvalidRequest) {
				t.Fatalf("error %v does not match ErrInvalidRequest", err)
			}
			return
		}
		for _, line := range strings.SplitAfter(string(b), "\n") {
			if line == "" {
				continue
			}
			name, value, found := strings.Cut(strings.TrimSuffix(line, "\n"), ": ")
			if !found || !isToken(name) || hostOnly(name) || badValueByte(value) >= 0 || !strings.HasSuffix(line, "\n") {
				t.Fatalf("line %q breaks the ABI", line)
			}
		}
		want := Header{"Kept": {"before"}}
		for name, values := range h {
			for _, v := range values {
				want.Add(name, strings.Trim(v, " \t"))
			}
		}
		if got := decodeHeader(b); !reflect.DeepEqual(got, want) {
			// Two names that differ only in case land under one
			// canonical name in an order that depends on sorting.
			if CanonicalHeaderKey(n1) != CanonicalHeaderKey(n2) || n1 == n2 {
				t.Fatalf("%q decodes to %q, want %q", b, got, want)
			}
		}
	})
}
