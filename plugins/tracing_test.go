package plugins_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/internal/tracing"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/call"
	"github.com/weftworks/weft/plugins/grant"
)

// tracedRuntime is a Tracer that exports to memory, and the context of an
// attempt's span under which the tests call.
type tracedRuntime struct {
	tr      *tracing.Tracer
	exp     *tracetest.InMemoryExporter
	ctx     context.Context
	attempt trace.SpanContext
}

func newTraced(t *testing.T) *tracedRuntime {
	t.Helper()
	exp := tracetest.NewInMemoryExporter()
	tr := tracing.NewTracer(1, sdktrace.WithSyncer(exp))
	t.Cleanup(func() {
		if err := tr.Shutdown(context.Background()); err != nil {
			t.Error(err)
		}
	})
	ctx, span := tr.Start(context.Background(), tracing.SpanAttempt)
	t.Cleanup(func() { span.End() })
	return &tracedRuntime{tr: tr, exp: exp, ctx: ctx, attempt: span.SpanContext()}
}

// clientSpans returns the ended spans of kind client, in the order they
// ended.
func (r *tracedRuntime) clientSpans() []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range r.exp.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			out = append(out, s)
		}
	}
	return out
}

func attrs(s tracetest.SpanStub) map[attribute.Key]attribute.Value {
	m := map[attribute.Key]attribute.Value{}
	for _, kv := range s.Attributes {
		m[kv.Key] = kv.Value
	}
	return m
}

// traceHeaders is a loopback server that records the trace headers of
// each request it gets and answers with the status in its path's "/s/N"
// (200 without), or redirects "/redirect" to "/s/200".
func traceHeaders(t *testing.T) (*httptest.Server, chan http.Header) {
	t.Helper()
	got := make(chan http.Header, 8)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- http.Header{"Traceparent": r.Header.Values("Traceparent"), "Tracestate": r.Header.Values("Tracestate")}
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "/s/200", http.StatusFound)
			return
		}
		status := 200
		if n, ok := strings.CutPrefix(r.URL.Path, "/s/"); ok {
			status, _ = strconv.Atoi(n)
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func traceparentOf(s tracetest.SpanStub) string {
	return fmt.Sprintf("00-%s-%s-01", s.SpanContext.TraceID(), s.SpanContext.SpanID())
}

// TestTracedRequestCarriesItsSpan: a request is a client span under the
// call's span, with the semantic conventions' attributes and no query,
// and the server gets the span as its parent.
func TestTracedRequestCarriesItsSpan(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	srv, got := traceHeaders(t)
	p := newHTTPProbe(t, plugins.Config{Tracer: tr.tr.Provider()})
	rs, err := p.do(tr.ctx, loopback(), probeRequest{URL: srv.URL + "/orders?token=q5ecret"})
	if err != nil || len(rs) != 1 || rs[0].Status != 200 {
		t.Fatalf("do: %+v, %v", rs, err)
	}
	spans := tr.clientSpans()
	if len(spans) != 1 {
		t.Fatalf("%d client spans, want 1: %+v", len(spans), spans)
	}
	s := spans[0]
	if s.Name != "HTTP GET" || s.Parent.SpanID() != tr.attempt.SpanID() || s.SpanContext.TraceID() != tr.attempt.TraceID() {
		t.Errorf("span %q under %s, want HTTP GET under the attempt's %s", s.Name, s.Parent.SpanID(), tr.attempt.SpanID())
	}
	if h := <-got; h.Get("Traceparent") != traceparentOf(s) || h.Get("Tracestate") != "" {
		t.Errorf("the server got traceparent %q tracestate %q, want %q and none", h.Get("Traceparent"), h.Get("Tracestate"), traceparentOf(s))
	}
	host, port := hostPort(t, srv)
	a := attrs(s)
	want := map[attribute.Key]string{
		"http.request.method": "GET", "url.full": srv.URL + "/orders", "url.scheme": "http",
		"server.address": host, "server.port": port, "http.response.status_code": "200",
		"weft.plugin": "probe", "weft.grant.rule": "http://127.0.0.1:*",
	}
	for k, v := range want {
		if a[k].String() != v {
			t.Errorf("attribute %s = %q, want %q", k, a[k].String(), v)
		}
	}
	if _, ok := a["error.type"]; ok || s.Status.Code != codes.Unset {
		t.Errorf("a 200 has error.type %q and status %v, want neither", a["error.type"].String(), s.Status)
	}
}

// TestTracedRequestFailures: a 5xx and a request without a response are
// failed spans that say why; a 4xx is not.
func TestTracedRequestFailures(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	srv, _ := traceHeaders(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + l.Addr().String() + "/"
	l.Close()
	p := newHTTPProbe(t, plugins.Config{Tracer: tr.tr.Provider()})
	for _, tc := range []struct {
		url, errorType string
		status         int // 0: no response
	}{
		{srv.URL + "/s/503", "503", 503},
		{srv.URL + "/s/404", "", 404},
		{closed, "unreachable", 0},
	} {
		before := len(tr.clientSpans())
		if _, err := p.do(tr.ctx, loopback(), probeRequest{URL: tc.url, Method: "POST"}); err != nil {
			t.Fatalf("%s: %v", tc.url, err)
		}
		spans := tr.clientSpans()
		if len(spans) != before+1 {
			t.Fatalf("%s: %d new client spans, want 1", tc.url, len(spans)-before)
		}
		s := spans[len(spans)-1]
		a := attrs(s)
		if got := a["error.type"].String(); got != tc.errorType {
			t.Errorf("%s: error.type %q, want %q", tc.url, got, tc.errorType)
		}
		if failed := s.Status.Code == codes.Error; failed != (tc.errorType != "") {
			t.Errorf("%s: status %+v, want failed %v", tc.url, s.Status, tc.errorType != "")
		}
		if tc.status == 0 {
			if _, ok := a["http.response.status_code"]; ok {
				t.Errorf("%s: a status code without a response", tc.url)
			}
		} else if got := a["http.response.status_code"].AsInt64(); got != int64(tc.status) {
			t.Errorf("%s: status code %d, want %d", tc.url, got, tc.status)
		}
	}
}

// TestTracedRedirectIsASpanPerHop: each hop of a redirect is a span of
// its own under the call's span, and each hop's server gets its hop's.
func TestTracedRedirectIsASpanPerHop(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	srv, got := traceHeaders(t)
	p := newHTTPProbe(t, plugins.Config{Tracer: tr.tr.Provider()})
	if rs, err := p.do(tr.ctx, loopback(), probeRequest{URL: srv.URL + "/redirect"}); err != nil || rs[0].Status != 200 {
		t.Fatalf("do: %+v, %v", rs, err)
	}
	spans := tr.clientSpans()
	if len(spans) != 2 {
		t.Fatalf("%d client spans, want one per hop", len(spans))
	}
	for i, s := range spans {
		if s.Parent.SpanID() != tr.attempt.SpanID() {
			t.Errorf("hop %d under %s, want the attempt's span", i, s.Parent.SpanID())
		}
		if h := <-got; h.Get("Traceparent") != traceparentOf(s) {
			t.Errorf("hop %d: the server got %q, want %q", i, h.Get("Traceparent"), traceparentOf(s))
		}
	}
	if a0, a1 := attrs(spans[0]), attrs(spans[1]); a0["http.response.status_code"].AsInt64() != 302 ||
		a1["http.response.status_code"].AsInt64() != 200 || a1["url.full"].String() != srv.URL+"/s/200" {
		t.Errorf("hops %v then %v, want the 302 then the 200 of /s/200", a0, a1)
	}
}

// TestTracedRequestKeepsTheGuestsTraceContext: a guest that sends a
// traceparent of its own propagates its context: the host sends it as it
// is and adds no tracestate, and still makes its span.
func TestTracedRequestKeepsTheGuestsTraceContext(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	srv, got := traceHeaders(t)
	p := newHTTPProbe(t, plugins.Config{Tracer: tr.tr.Provider()})
	const mine = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	if _, err := p.do(tr.ctx, loopback(), probeRequest{URL: srv.URL, Headers: "traceparent: " + mine + "\n"}); err != nil {
		t.Fatal(err)
	}
	if h := <-got; h.Get("Traceparent") != mine || len(h.Values("Traceparent")) != 1 || h.Get("Tracestate") != "" {
		t.Errorf("the server got traceparent %q tracestate %q, want the guest's alone", h.Values("Traceparent"), h.Get("Tracestate"))
	}
	if n := len(tr.clientSpans()); n != 1 {
		t.Errorf("%d client spans, want 1", n)
	}
}

// TestUntracedRequestHasNoTraceContext: without a Tracer the host adds no
// trace header, even under a span.
func TestUntracedRequestHasNoTraceContext(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	srv, got := traceHeaders(t)
	p := newHTTPProbe(t, plugins.Config{})
	if _, err := p.do(tr.ctx, loopback(), probeRequest{URL: srv.URL}); err != nil {
		t.Fatal(err)
	}
	if h := <-got; len(h.Values("Traceparent")) != 0 || len(h.Values("Tracestate")) != 0 {
		t.Errorf("the server got trace headers %v without a Tracer", h)
	}
	if n := len(tr.clientSpans()); n != 0 {
		t.Errorf("%d client spans without a Tracer", n)
	}
}

// TestTracedRateLimitedRequest: a hop a rate limit keeps from being sent
// is a failed span that says so.
func TestTracedRateLimitedRequest(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	srv, _ := traceHeaders(t)
	p := newHTTPProbe(t, plugins.Config{Tracer: tr.tr.Provider()})
	g := limited(grant.RateLimit{Limit: ratelimit.Limit{Count: 2, Per: 3 * time.Minute}, MaxWait: 80 * time.Second})
	rs, err := p.do(tr.ctx, g, probeRequest{URL: srv.URL, Repeat: 2})
	if err != nil || len(rs) != 2 || rs[1].Status != 429 {
		t.Fatalf("do: %+v, %v; want a 200 then a 429", rs, err)
	}
	spans := tr.clientSpans()
	if len(spans) != 2 {
		t.Fatalf("%d client spans, want 2", len(spans))
	}
	a := attrs(spans[1])
	if !a["weft.http.rate_limited"].AsBool() || a["error.type"].String() != "rate_limited" || spans[1].Status.Code != codes.Error ||
		a["http.response.status_code"].AsInt64() != 429 {
		t.Errorf("the refused hop's span: %v %+v", a, spans[1].Status)
	}
	if _, ok := attrs(spans[0])["weft.http.rate_limited"]; ok {
		t.Errorf("the sent hop is marked rate limited")
	}
}

// TestTracedRequestHoldsNoSecret: a secret the guest put in the URL's
// path or query is in no span.
func TestTracedRequestHoldsNoSecret(t *testing.T) {
	t.Parallel()
	tr := newTraced(t)
	srv, _ := traceHeaders(t)
	f := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(f, []byte(leakSecret), 0o600); err != nil {
		t.Fatal(err)
	}
	rt := testplugins.Runtime(t, plugins.Config{Tracer: tr.tr.Provider()})
	p := &leakPlugin{rt: rt, version: loadFile(t, rt, testplugins.Testdata(t, "plugins/testdata/leak")),
		grants: &grant.Set{
			Hosts:   []grant.Host{{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}},
			Secrets: map[string]string{"token": "file:" + f},
		}}
	for _, url := range []string{srv.URL + "/hook/", srv.URL + "/hook?key="} {
		r := p.call(t, "leaky", map[string]any{"read": "token", "url": url, "into": []string{"path"}})
		if r.err != nil {
			t.Fatalf("%s: %v", url, r.err)
		}
	}
	spans := tr.clientSpans()
	if len(spans) != 2 {
		t.Fatalf("%d client spans, want 2", len(spans))
	}
	b, err := json.Marshal(spans)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), leakSecret[:12]) {
		t.Errorf("a span holds the secret:\n%s", b)
	}
	if got := attrs(spans[0])["url.full"].String(); got != srv.URL+"/hook/[secret]" {
		t.Errorf("url.full %q, want the path's secret masked", got)
	}
	if got := attrs(spans[1])["url.full"].String(); got != srv.URL+"/hook" {
		t.Errorf("url.full %q, want no query", got)
	}
}

// TestInfoTraceIDs: info carries the attempt's trace_id and span_id when
// the host traces it, and has neither key otherwise.
func TestInfoTraceIDs(t *testing.T) {
	t.Parallel()
	rt := testplugins.Runtime(t, plugins.Config{})
	v := abiGuest{invoke: `(call $result (i32.const 1024) (call $info (i32.const 1024) (i32.const 4096))) (i32.const 0)`}.load(t, rt)
	const tid, sid = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	for _, tc := range []struct {
		name      string
		info      abi.Info
		traceKeys bool
	}{
		{"traced", abi.Info{Plugin: "p", TraceID: tid, SpanID: sid}, true},
		{"untraced", abi.Info{Plugin: "p"}, false},
	} {
		out, err := rt.Invoke(context.Background(), v, call.Call{Activity: "run", Info: tc.info})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var doc map[string]any
		if err := json.Unmarshal(out, &doc); err != nil {
			t.Fatalf("%s: info %s: %v", tc.name, out, err)
		}
		_, hasTrace := doc["trace_id"]
		_, hasSpan := doc["span_id"]
		if hasTrace != tc.traceKeys || hasSpan != tc.traceKeys {
			t.Errorf("%s: info %s, want trace_id and span_id present: %v", tc.name, out, tc.traceKeys)
		}
		if tc.traceKeys && (doc["trace_id"] != tid || doc["span_id"] != sid) {
			t.Errorf("%s: info %s, want trace_id %s span_id %s", tc.name, out, tid, sid)
		}
	}
}
