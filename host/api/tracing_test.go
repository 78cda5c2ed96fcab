package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/hosttest"
	"github.com/weftworks/weft/internal/otlptest"
	"github.com/weftworks/weft/internal/tracing"
)

// The caller's span, as a W3C traceparent: trace c0ffee…, span 00f067aa0ba902b7, sampled.
const (
	callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"
	callerSpan  = "00f067aa0ba902b7"
	callerTP    = "00-" + callerTrace + "-" + callerSpan + "-01"
)

// waitFlow needs no plugin: an instance of it waits for its event.
const waitFlow = `
name: waiter
steps:
  - id: w
    wait: { event: order.go, key: "${ input.id }", timeout: 1h }
`

// newTracedHost is a test host whose node sends its spans to rcv.
func newTracedHost(t *testing.T, rcv *otlptest.Receiver) *host {
	t.Helper()
	return newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}, node: node.Config{
		Tracing: tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: rcv.HTTPEndpoint(), SampleRate: 1},
	}})
}

// traced sends a request as admin with the caller's traceparent (none
// when tp is empty).
func (h *host) traced(method, path, tp string, body any) *http.Response {
	h.t.Helper()
	var b []byte
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			h.t.Fatal(err)
		}
	}
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(b))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+hosttest.AdminToken)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if tp != "" {
		req.Header.Set("traceparent", tp)
		req.Header.Set("tracestate", "vendor=1")
	}
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	res.Body.Close()
	return res
}

// flush exports the node's queued spans now.
func (h *host) flush() {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := h.node.TracerProvider().(interface{ ForceFlush(context.Context) error }).ForceFlush(ctx); err != nil {
		h.t.Fatalf("flushing the spans: %v", err)
	}
}

// spanNamed waits for the span named name whose weft.request_id is id.
func spanNamed(t *testing.T, rcv *otlptest.Receiver, name, id string) otlptest.Span {
	t.Helper()
	var found otlptest.Span
	rcv.WaitForSpans(t, func(spans []otlptest.Span) bool {
		for _, s := range spans {
			if s.Name == name && s.Attributes["weft.request_id"] == id {
				found = s
				return true
			}
		}
		return false
	}, 15*time.Second)
	return found
}

// TestTracingRequestSpans: each request is a server span named after its
// route, in the caller's trace when it sent a traceparent (its own
// otherwise), with the method, route, status and request id; a start
// that carried a traceparent makes the instance's span the request's
// child.
func TestTracingRequestSpans(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	h := newTracedHost(t, rcv)
	h.putWorkflow("waiter", waitFlow)

	// A start under the caller's trace.
	res := h.traced(http.MethodPost, "/v1/workflows/waiter/instances", callerTP, map[string]any{"id": "traced-1", "input": map[string]any{"id": "o1"}})
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("start: status %d, want 201", res.StatusCode)
	}
	startID := res.Header.Get("X-Request-Id")
	// A lookup that finds nothing, without a traceparent.
	res = h.traced(http.MethodGet, "/v1/instances/nope", "", nil)
	if res.StatusCode != http.StatusNotFound {
		t.Fatalf("get: status %d, want 404", res.StatusCode)
	}
	getID := res.Header.Get("X-Request-Id")
	// An event under the caller's trace, and a path no route takes.
	res = h.traced(http.MethodPost, "/v1/events", callerTP, map[string]any{"name": "order.go", "key": "o1"})
	if res.StatusCode != http.StatusAccepted {
		t.Fatalf("event: status %d, want 202", res.StatusCode)
	}
	eventID := res.Header.Get("X-Request-Id")
	res = h.traced(http.MethodGet, "/v1/no-such-thing", "", nil)
	unmatchedID := res.Header.Get("X-Request-Id")
	h.flush()

	start := spanNamed(t, rcv, "POST /v1/workflows/:name/instances", startID)
	if start.TraceID != callerTrace || start.ParentSpanID != callerSpan || start.TraceState != "vendor=1" {
		t.Errorf("start span in trace %s under %s (state %q), want the caller's %s under %s (vendor=1)", start.TraceID, start.ParentSpanID, start.TraceState, callerTrace, callerSpan)
	}
	if start.Kind != "SERVER" || start.Attributes["http.request.method"] != "POST" || start.Attributes["http.route"] != "/v1/workflows/:name/instances" ||
		start.Attributes["http.response.status_code"] != int64(201) || start.StatusCode == "ERROR" {
		t.Errorf("start span %+v: want a SERVER span with method POST, its route and status 201", start)
	}
	get := spanNamed(t, rcv, "GET /v1/instances/:id", getID)
	if get.TraceID == callerTrace || get.ParentSpanID != "" {
		t.Errorf("a request without a traceparent is in trace %s under %q, want a root of its own", get.TraceID, get.ParentSpanID)
	}
	if get.Attributes["http.response.status_code"] != int64(404) || get.StatusCode == "ERROR" {
		t.Errorf("get span %+v: want status 404 and not an error (a 4xx is the client's)", get)
	}
	event := spanNamed(t, rcv, "POST /v1/events", eventID)
	if event.TraceID != callerTrace || event.ParentSpanID != callerSpan {
		t.Errorf("event span in trace %s under %s, want the caller's", event.TraceID, event.ParentSpanID)
	}
	unmatched := spanNamed(t, rcv, "GET unmatched", unmatchedID)
	if _, ok := unmatched.Attributes["http.route"]; ok {
		t.Errorf("an unmatched request's span has a route: %v", unmatched.Attributes)
	}

	// The instance's trace (tracing.Begin, under the request's context)
	// is a child of the request's span.
	inst, err := h.node.Instance(context.Background(), "traced-1")
	if err != nil {
		t.Fatal(err)
	}
	if inst.Trace == nil {
		t.Fatal("the instance started under a traced request has no trace")
	}
	if inst.Trace.Parent != start.SpanID {
		t.Errorf("the instance's trace %+v, want its parent the start request's span %s", inst.Trace, start.SpanID)
	}
}

// TestTracingOffMakesNoSpans: a host without tracing has no Tracer and
// answers as before.
func TestTracingOffMakesNoSpans(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	if h.node.TracerProvider() != nil {
		t.Fatal("a node without tracing configured has a Tracer")
	}
	if res := h.traced(http.MethodGet, "/v1/instances/nope", callerTP, nil); res.StatusCode != http.StatusNotFound {
		t.Fatalf("status %d, want 404", res.StatusCode)
	}
}
