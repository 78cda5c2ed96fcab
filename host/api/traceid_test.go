package api_test

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/otlptest"
	"github.com/weftworks/weft/internal/tracing"
)

// traceIDPattern is a W3C trace id as the API answers it.
var traceIDPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

// startWaiter starts an instance of waitFlow with id, as admin, with the
// caller's traceparent tp (none when empty), and answers it as read
// back by GET /v1/instances/{id}.
func (h *host) startWaiter(id, tp string) apiv1.Instance {
	h.t.Helper()
	res := h.traced(http.MethodPost, "/v1/workflows/waiter/instances", tp, map[string]any{"id": id, "input": map[string]any{"id": id}})
	if res.StatusCode != http.StatusCreated {
		h.t.Fatalf("starting %s: status %d, want 201", id, res.StatusCode)
	}
	var in apiv1.Instance
	h.do(http.MethodGet, "/v1/instances/"+id, nil).want(h.t, http.StatusOK).json(h.t, &in)
	return in
}

// listed is the instance id as GET /v1/instances lists it.
func (h *host) listed(id string) apiv1.Instance {
	h.t.Helper()
	var page apiv1.Page[apiv1.Instance]
	h.do(http.MethodGet, "/v1/instances?workflow=waiter&limit=100", nil).want(h.t, http.StatusOK).json(h.t, &page)
	for _, in := range page.Items {
		if in.ID == id {
			return in
		}
	}
	h.t.Fatalf("GET /v1/instances does not list %s", id)
	return apiv1.Instance{}
}

// storedTraceID is the trace id of the traceparent the node keeps for
// instance id ("" when it keeps none).
func (h *host) storedTraceID(id string) string {
	h.t.Helper()
	inst, err := h.node.Instance(context.Background(), id)
	if err != nil {
		h.t.Fatalf("reading instance %s: %v", id, err)
	}
	if inst.Trace == nil {
		return ""
	}
	parts := strings.Split(inst.Trace.Span, "-")
	if len(parts) != 4 {
		h.t.Fatalf("instance %s keeps the traceparent %q, want four parts", id, inst.Trace.Span)
	}
	return parts[1]
}

// TestInstanceTraceIDSampled: on a host that traces every instance, an
// instance's document, read alone, in a list and as the start's answer,
// has the trace id of the trace the node keeps for it, and the node's
// spans of the instance are in that trace; a start that carried a
// caller's sampled traceparent makes it the caller's trace.
func TestInstanceTraceIDSampled(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	h := newTracedHost(t, rcv)
	h.putWorkflow("waiter", waitFlow)

	own := h.startWaiter("trace-own", "")
	if !traceIDPattern.MatchString(own.TraceID) {
		t.Fatalf("trace-own has trace_id %q, want 32 hex digits", own.TraceID)
	}
	if stored := h.storedTraceID("trace-own"); own.TraceID != stored {
		t.Errorf("trace-own answers trace_id %s, want the one the node keeps, %s", own.TraceID, stored)
	}
	if own.TraceID == callerTrace {
		t.Errorf("an instance started without a traceparent is in the caller's trace %s", callerTrace)
	}
	if got := h.listed("trace-own").TraceID; got != own.TraceID {
		t.Errorf("the list shows trace-own with trace_id %q, want %s", got, own.TraceID)
	}
	var answered apiv1.Instance
	h.do(http.MethodPost, "/v1/workflows/waiter/instances", map[string]any{"id": "trace-own", "input": map[string]any{"id": "trace-own"}}).
		want(t, http.StatusOK).json(t, &answered)
	if answered.TraceID != own.TraceID {
		t.Errorf("the start's answer has trace_id %q, want %s", answered.TraceID, own.TraceID)
	}

	joined := h.startWaiter("trace-joined", callerTP)
	if joined.TraceID != callerTrace {
		t.Errorf("an instance started under the caller's sampled traceparent has trace_id %q, want the caller's %s", joined.TraceID, callerTrace)
	}

	// The id leads to spans: the instance's turn is in that trace.
	h.awaitStatus("trace-own", "suspended")
	h.flush()
	rcv.WaitForSpans(t, func(spans []otlptest.Span) bool {
		for _, s := range spans {
			if s.Name == tracing.SpanExecution && s.TraceID == own.TraceID {
				return true
			}
		}
		return false
	}, 20*time.Second)
}

// TestInstanceTraceIDNotSampled: a trace that is not sampled has no
// spans, so its id is not answered, though the node keeps it; a caller's
// sampled traceparent is followed all the same, and a caller's unsampled
// one is not.
func TestInstanceTraceIDNotSampled(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}, node: node.Config{
		Tracing: tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: rcv.HTTPEndpoint(), SampleRate: 0},
	}})
	h.putWorkflow("waiter", waitFlow)

	own := h.startWaiter("unsampled-own", "")
	if own.TraceID != "" {
		t.Errorf("an instance whose trace is not sampled has trace_id %q, want none", own.TraceID)
	}
	if h.storedTraceID("unsampled-own") == "" {
		t.Error("the node keeps no trace for an instance created with tracing on: the test shows nothing")
	}
	if got := h.listed("unsampled-own").TraceID; got != "" {
		t.Errorf("the list shows an unsampled instance with trace_id %q, want none", got)
	}
	if joined := h.startWaiter("unsampled-joined", callerTP); joined.TraceID != callerTrace {
		t.Errorf("an instance started under the caller's sampled traceparent has trace_id %q, want the caller's %s", joined.TraceID, callerTrace)
	}
	unsampledTP := strings.TrimSuffix(callerTP, "-01") + "-00"
	if declined := h.startWaiter("unsampled-declined", unsampledTP); declined.TraceID != "" {
		t.Errorf("an instance started under the caller's unsampled traceparent has trace_id %q, want none", declined.TraceID)
	}
}

// TestInstanceTraceIDTracingOff: a host that does not trace answers no
// trace_id at all, even for a start that carried a traceparent.
func TestInstanceTraceIDTracingOff(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("waiter", waitFlow)
	h.startWaiter("untraced", callerTP)
	r := h.do(http.MethodGet, "/v1/instances/untraced", nil).want(t, http.StatusOK)
	var doc map[string]any
	r.json(t, &doc)
	if v, ok := doc["trace_id"]; ok {
		t.Errorf("an instance created with tracing off has trace_id %v, want none", v)
	}
	r = h.do(http.MethodGet, "/v1/instances?workflow=waiter", nil).want(t, http.StatusOK)
	if strings.Contains(string(r.body), "trace_id") {
		t.Errorf("a list of instances created with tracing off has a trace_id: %s", r.body)
	}
}
