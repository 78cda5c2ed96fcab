package console_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/hosttest"
	"github.com/weftworks/weft/internal/otlptest"
	"github.com/weftworks/weft/internal/tracing"
)

// traceWaitFlow needs no plugin: an instance of it waits for its event.
const traceWaitFlow = `
name: waiter
steps:
  - id: w
    wait: { event: order.go, key: "${ input.id }", timeout: 1h }
`

// callerTrace is the trace of the caller's sampled traceparent that
// TestBrowserInstanceTraceID starts an instance under.
const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736"

// startTraced starts an instance of traceWaitFlow with id, under the
// traceparent tp (none when empty), and answers its trace_id.
func startTraced(t *testing.T, h *hosttest.Host, id, tp string) string {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"id": id, "input": map[string]any{"id": id}})
	req, err := http.NewRequest(http.MethodPost, h.URL+"/v1/workflows/waiter/instances", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	req.Header.Set("Content-Type", "application/json")
	if tp != "" {
		req.Header.Set("traceparent", tp)
	}
	res, err := h.HTTP.Do(req)
	if err != nil {
		t.Fatalf("starting %s: %v", id, err)
	}
	defer res.Body.Close()
	var in struct {
		TraceID string `json:"trace_id"`
	}
	if err := json.NewDecoder(res.Body).Decode(&in); err != nil || res.StatusCode != http.StatusCreated {
		t.Fatalf("starting %s: status %d (%v), want 201", id, res.StatusCode, err)
	}
	return in.TraceID
}

// traceViewer is the tracing.viewer_url of TestBrowserInstanceTraceID's
// second host: a query after the id, so that the id is shown replacing
// the placeholder, not appended.
const traceViewer = "https://jaeger.example.com/trace/{trace_id}?uiFind=weft"

// TestBrowserInstanceTraceID: the instance page of a traced (sampled)
// instance shows its trace id, with a button that copies it (or, where
// the page may not write the clipboard, selects it); an instance whose
// trace is not sampled shows no trace. The id is a link only on a host
// that names its trace viewer (tracing.viewer_url): to the viewer's URL
// with the id in it, in a new tab, the copy button kept.
func TestBrowserInstanceTraceID(t *testing.T) {
	rcv := otlptest.Start(t)
	// Nothing sampled but what a caller sampled: one host has both kinds.
	h := hosttest.New(t, hosttest.Options{API: api.Config{Tokens: hosttest.Tokens()}, Node: node.Config{
		Tracing: tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: rcv.HTTPEndpoint(), SampleRate: 0},
	}})
	h.PutWorkflow(t, "waiter", traceWaitFlow)
	if id := startTraced(t, h, "traced", "00-"+callerTrace+"-00f067aa0ba902b7-01"); id != callerTrace {
		t.Fatalf("the API answers the traced instance's trace_id %q, want the caller's %s", id, callerTrace)
	}
	if id := startTraced(t, h, "unsampled", ""); id != "" {
		t.Fatalf("the API answers an unsampled instance's trace_id %q, want none", id)
	}

	tb := openTab(t, h.URL)
	tb.open("/instances/traced", readerSecret, "reader")
	waitStatus(tb, "suspended")
	shown := waitFor(tb, "the trace id", q("[data-test=instance-trace-id]")+"?.textContent ?? ''", func(s string) bool { return s != "" })
	if shown != callerTrace {
		t.Errorf("the instance page shows trace id %q, want %s", shown, callerTrace)
	}
	if row := eval[string](tb, q("[data-test=instance-trace-id]")+".closest('dd').previousElementSibling.textContent"); row != "trace" {
		t.Errorf("the trace id is in the row %q, want trace", row)
	}
	if eval[bool](tb, q("[data-test=instance-trace-id]")+".closest('a') !== null") {
		t.Error("the trace id is a link on a host that names no trace viewer")
	}

	// Copied, or selected where the clipboard may not be written.
	tb.click("[data-test=copy-trace-id]")
	notice := waitFor(tb, "the copy's notice", q("[data-test=notice]")+".textContent", func(s string) bool { return strings.HasPrefix(s, "Trace id") })
	switch {
	case strings.Contains(notice, "copied"):
	case strings.Contains(notice, "selected"):
		if sel := eval[string](tb, "window.getSelection().toString()"); sel != callerTrace {
			t.Errorf("the copy button selected %q, want the trace id %s", sel, callerTrace)
		}
	default:
		t.Errorf("the copy button says %q, want the id copied or selected", notice)
	}

	tb.goTo("/instances/unsampled")
	waitFor(tb, "the unsampled instance's page", q("[data-test=instance-id]")+"?.textContent ?? ''", func(s string) bool { return s == "unsampled" })
	waitStatus(tb, "suspended")
	if eval[bool](tb, q("[data-test=instance-trace-id]")+" !== null") {
		t.Error("the page of an instance whose trace is not sampled shows a trace id")
	}
	tb.checkErrors()

	// A host that names its trace viewer: the same browser, on it.
	linked := hosttest.New(t, hosttest.Options{API: api.Config{Tokens: hosttest.Tokens(), TraceViewerURL: traceViewer}, Node: node.Config{
		Tracing: tracing.Config{Exporter: tracing.ExporterOTLP, Endpoint: rcv.HTTPEndpoint(), SampleRate: 0},
	}})
	linked.PutWorkflow(t, "waiter", traceWaitFlow)
	startTraced(t, linked, "linked", "00-"+callerTrace+"-00f067aa0ba902b7-01")
	tb.base = linked.URL
	tb.open("/instances/linked", readerSecret, "reader")
	waitStatus(tb, "suspended")
	link := q("[data-test=instance-trace-link]")
	href := waitFor(tb, "the trace id's link", link+"?.getAttribute('href') ?? ''", func(s string) bool { return s != "" })
	if want := strings.Replace(traceViewer, "{trace_id}", callerTrace, 1); href != want {
		t.Errorf("the trace id links to %q, want %q", href, want)
	}
	if got := eval[string](tb, link+".querySelector('[data-test=instance-trace-id]')?.textContent ?? ''"); got != callerTrace {
		t.Errorf("the link shows %q, want the trace id %s", got, callerTrace)
	}
	if target, rel := eval[string](tb, link+".target"), eval[string](tb, link+".rel"); target != "_blank" || !strings.Contains(rel, "noopener") {
		t.Errorf("the trace link opens with target %q rel %q, want a new tab with noopener", target, rel)
	}
	if eval[bool](tb, q("[data-test=copy-trace-id]")+" === null") {
		t.Error("the copy button is gone beside the trace link")
	}
	tb.checkErrors()
}
