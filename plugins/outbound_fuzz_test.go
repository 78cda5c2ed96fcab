package plugins_test

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// httpWAT is a plugin whose activity "send" passes its input, unparsed, to
// http_request: [u32 method_len][u32 url_len][u32 headers_len] and then the
// method, URL, headers and body bytes. Its output is null.
const httpWAT = `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "weft" "http_request" (func $http (param i32 i32 i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"activities\":[{\"name\":\"send\"}]}")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param $n i32) (result i32)
    (if (result i32) (i32.gt_u (local.get $n) (i32.const 32768))
      (then (i32.const 0)) (else (i32.const 32768))))
  (func (export "weft_manifest") (result i32)
    (call $result (i32.const 0) (i32.const 32)) (i32.const 0))
  (func (export "weft_invoke") (param $p i32) (param $alen i32) (param $n i32) (result i32)
    (local $i i32) (local $m i32) (local $u i32) (local $h i32) (local $rest i32)
    (local.set $i (i32.add (local.get $p) (local.get $alen)))
    (if (i32.lt_u (local.get $n) (i32.const 12))
      (then (call $result (i32.const 0) (i32.const 0)) (return (i32.const 0))))
    (local.set $m (i32.load (local.get $i)))
    (local.set $u (i32.load (i32.add (local.get $i) (i32.const 4))))
    (local.set $h (i32.load (i32.add (local.get $i) (i32.const 8))))
    (local.set $i (i32.add (local.get $i) (i32.const 12)))
    (local.set $rest (i32.sub (local.get $n) (i32.const 12)))
    ;; lengths past the input are the host's to refuse: pass them on
    (drop (call $http
      (local.get $i) (local.get $m)
      (i32.add (local.get $i) (local.get $m)) (local.get $u)
      (i32.add (i32.add (local.get $i) (local.get $m)) (local.get $u)) (local.get $h)
      (i32.add (i32.add (i32.add (local.get $i) (local.get $m)) (local.get $u)) (local.get $h))
      (i32.sub (local.get $rest) (i32.add (i32.add (local.get $m) (local.get $u)) (local.get $h)))))
    (call $result (i32.const 0) (i32.const 0))
    (i32.const 0)))`

func httpInput(method, url, headers, body string) []byte {
	b := binary.LittleEndian.AppendUint32(nil, uint32(len(method)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(url)))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(headers)))
	return append(append(append(append(b, method...), url...), headers...), body...)
}

// FuzzHTTPRequest hands http_request arbitrary arguments, with a loopback
// server granted: the host sends a request that says what the guest passed,
// or stops the call with an ABI violation, a limit or not_granted, and
// never reaches another server.
func FuzzHTTPRequest(f *testing.F) {
	type seen struct{ method, body string }
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		select {
		case got <- seen{r.Method, string(b)}:
		default:
		}
	}))
	f.Cleanup(srv.Close)
	rt := testplugins.Runtime(f, plugins.Config{HTTP: plugins.HTTPConfig{MaxRequestBytes: 4096, MaxHeaders: 16, MaxHeaderBytes: 2048}})
	m, err := rt.Load(context.Background(), testplugins.WAT(f, httpWAT))
	if err != nil {
		f.Fatal(err)
	}
	g := &grant.Set{Hosts: []grant.Host{{Pattern: srv.URL, PrivateNetworks: true}}}
	for _, s := range [][4]string{
		{"POST", srv.URL + "/a?b=c", "Content-Type: text/plain\nX-A: 1\r\nX-A: 2", "body"},
		{"", srv.URL, "", ""},
		{"GET", srv.URL, "Host: evil", ""},
		{"GET", srv.URL, "X-A: 1\r\nX-B", ""},
		{"G\x00T", srv.URL, "", ""},
		{"GET", "http://169.254.169.254/", "", ""},
		{"GET", "//" + strings.TrimPrefix(srv.URL, "http://"), "", ""},
		{"DELETE", srv.URL + "/../../x#frag", ":\n:\n", ""},
		{"PATCH", "https://user:pw@" + strings.TrimPrefix(srv.URL, "http://"), "X: \x7f", strings.Repeat("x", 5000)},
	} {
		f.Add(s[0], s[1], s[2], s[3])
	}
	// The first seed must reach the server: a guest that never gets there
	// would make every input pass.
	if _, err := rt.Invoke(context.Background(), m.Version, call.Call{Activity: "send", Input: httpInput("POST", srv.URL, "", "x"), Grants: g}); err != nil {
		f.Fatalf("a plain request: %v", err)
	}
	if s := <-got; s.method != "POST" || s.body != "x" {
		f.Fatalf("a plain request reached the server as %+v", s)
	}
	f.Fuzz(func(t *testing.T, method, url, headers, body string) {
		for len(got) > 0 {
			<-got
		}
		_, err := rt.Invoke(context.Background(), m.Version, call.Call{Activity: "send", Input: httpInput(method, url, headers, body), Grants: g, Info: abi.Info{Plugin: "fuzz"}})
		if err != nil {
			if !errors.Is(err, call.ErrProtocol) && !errors.Is(err, call.ErrLimit) && !errors.Is(err, call.ErrNotGranted) {
				t.Fatalf("%q %q %q: %v, want an ABI violation, a limit or not_granted", method, url, headers, err)
			}
			return
		}
		select {
		case s := <-got:
			want := method
			if want == "" {
				want = http.MethodGet
			}
			if s.method != want || s.body != body {
				t.Fatalf("sent %q with %q; the server saw %q with %q", want, body, s.method, s.body)
			}
		default: // no response, reported to the guest (a refused connection, a redirect loop …)
		}
	})
}
