package main

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/internal/otlptest"
)

// TestCLIInstanceShowsTrace: on a host that sends traces, `weft instance
// show` prints a sampled instance's trace id, and -o json carries it as
// the API's trace_id; an instance whose trace is not sampled has none to
// print. The host samples no new trace (tracing.sample_rate=0): the
// sampled instance is started under a caller's sampled traceparent.
func TestCLIInstanceShowsTrace(t *testing.T) {
	t.Parallel()
	rcv := otlptest.Start(t)
	ts := startServer(t, "--set", "tracing.exporter=otlp", "--set", "tracing.endpoint="+rcv.HTTPEndpoint(),
		"--set", "tracing.sample_rate=0")
	ts.ok(t, "workflow", "put", writeFile(t, t.TempDir(), "waiter.yaml", `name: waiter
steps:
  - id: w
    wait: { event: order.go, key: "${ input.id }", timeout: 1h }
`))

	const caller = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, err := http.NewRequest(http.MethodPost, ts.url+"/v1/workflows/waiter/instances",
		bytes.NewReader([]byte(`{"id": "traced", "input": {"id": "traced"}}`)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", "00-"+caller+"-00f067aa0ba902b7-01")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("starting traced: %v", err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("starting traced: status %d, want 201", res.StatusCode)
	}
	ts.ok(t, "run", "waiter", "--id", "unsampled", "--input", `{"id": "unsampled"}`)

	if out := ts.ok(t, "instance", "show", "traced"); !strings.Contains(out, "\ntrace:     "+caller+"\n") {
		t.Errorf("instance show of a sampled instance lacks the line %q:\n%s", "trace:     "+caller, out)
	}
	var doc struct {
		TraceID string `json:"trace_id"`
	}
	ts.okJSON(t, &doc, "instance", "show", "traced")
	if doc.TraceID != caller {
		t.Errorf("instance show -o json has trace_id %q, want %s", doc.TraceID, caller)
	}
	if out := ts.ok(t, "instance", "show", "unsampled"); strings.Contains(out, "trace:") {
		t.Errorf("instance show of an unsampled instance prints a trace:\n%s", out)
	}
}
