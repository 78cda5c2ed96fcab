package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
)

// TestShutdownDrainsWait: a start request waiting on ?wait= when Shutdown
// begins gets a complete answer (the instance as it is then), and Shutdown
// returns without holding for the rest of the wait.
func TestShutdownDrainsWait(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("slow", `
name: slow
steps:
  - { id: work, activity: kit.work, input: { ms: 20000, beat_ms: 100 }, timeout: 1m }
`)
	type answer struct {
		status int
		body   []byte
		err    error
	}
	answered := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequest("POST", h.url+"/v1/workflows/slow/instances?wait=2m", strings.NewReader(`{"id": "slow-1"}`))
		req.Header.Set("Authorization", "Bearer "+operatorSecret)
		req.Header.Set("Content-Type", "application/json")
		res, err := h.client.Do(req)
		if err != nil {
			answered <- answer{err: err}
			return
		}
		defer res.Body.Close()
		b, err := io.ReadAll(res.Body)
		answered <- answer{status: res.StatusCode, body: b, err: err}
	}()
	// The request is in flight once its instance exists.
	deadline := time.Now().Add(30 * time.Second)
	for h.do("GET", "/v1/instances/slow-1", nil).status != http.StatusOK {
		if time.Now().After(deadline) {
			t.Fatal("the instance was not created within 30s")
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	start := time.Now()
	if err := h.srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	a := <-answered
	if a.err != nil {
		t.Fatalf("the waiting request failed: %v", a.err)
	}
	var in instance
	if a.status != http.StatusCreated || json.Unmarshal(a.body, &in) != nil || in.ID != "slow-1" || (in.Status != "running" && in.Status != "pending") {
		t.Fatalf("answer %d %s", a.status, a.body)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("Shutdown took %s: it waited for the instance", d)
	}
	select {
	case <-h.served:
		if h.serveErr != nil {
			t.Fatalf("Serve returned %v", h.serveErr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after Shutdown")
	}
}

// TestOpenAPIMatchesRoutes: every registered route is documented and every
// documented operation is registered, but the console's files (not API).
func TestOpenAPIMatchesRoutes(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	param := regexp.MustCompile(`:([a-z]+)`)
	registered := map[string]bool{}
	for _, r := range h.srv.App().GetRoutes(true) {
		if r.Method == "HEAD" {
			continue // every GET answers HEAD too; OpenAPI documents the GET
		}
		if h.srv.NotAPI()[r.Method+" "+r.Path] {
			continue // the console's files, not API
		}
		registered[r.Method+" "+param.ReplaceAllString(r.Path, "{$1}")] = true
	}
	doc := map[string]bool{}
	for _, op := range documented(t) {
		doc[op.method+" "+op.path] = true
	}
	var missing, extra []string
	for k := range registered {
		if !doc[k] {
			missing = append(missing, k)
		}
	}
	for k := range doc {
		if !registered[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(missing)
	sort.Strings(extra)
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("registered but not documented: %v\ndocumented but not registered: %v", missing, extra)
	}
	// The served document is the file.
	served := h.request("GET", "/v1/openapi.json", "", "", nil).want(t, http.StatusOK)
	file, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if string(served.body) != string(file) {
		t.Fatal("the served document differs from openapi.json")
	}
}

// TestOpenAPIDocumentsBodyRefusals: every operation documents the 415 that
// a Content-Encoding gets, and gets it; every operation that takes a body
// documents the 413 of an oversized one and the 503 (busy, Retry-After)
// of one that finds no room in the body budget.
func TestOpenAPIDocumentsBodyRefusals(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Responses map[string]struct {
				Description string                     `json:"description"`
				Headers     map[string]json.RawMessage `json:"headers"`
				Content     map[string]json.RawMessage `json:"content"`
			} `json:"responses"`
		} `json:"components"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	busy, ok := doc.Components.Responses["Busy"]
	if !ok || busy.Headers["Retry-After"] == nil || busy.Content[apiv1.ProblemContentType] == nil || !strings.Contains(busy.Description, "urn:weft:problem:busy") {
		t.Fatalf("components.responses.Busy = %+v; want a busy problem with a Retry-After header", busy)
	}
	h := newHost(t)
	bodies := 0
	for _, op := range documented(t) {
		name := op.method + " " + op.path
		if _, ok := op.responses["415"]; !ok {
			t.Errorf("%s: no 415 documented", name)
		}
		if op.body {
			bodies++
			if op.responses["413"] == "" {
				t.Errorf("%s takes a body but documents no 413", name)
			}
			if op.responses["503"] != "#/components/responses/Busy" {
				t.Errorf("%s takes a body but its 503 is %q, want the Busy response", name, op.responses["503"])
			}
		}
		req, err := http.NewRequest(op.method, h.url+concrete(op.path), strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminSecret)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
		res, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusUnsupportedMediaType {
			t.Errorf("%s with Content-Encoding: gzip: status %d, want 415: %s", name, res.StatusCode, body)
			continue
		}
		if p := (response{status: res.StatusCode, header: res.Header, body: body}).problem(t); p.Type != "urn:weft:problem:unsupported-encoding" {
			t.Errorf("%s with Content-Encoding: gzip: %+v, want an unsupported-encoding problem", name, p)
		}
	}
	if bodies < 7 {
		t.Errorf("only %d operations take a body", bodies)
	}
}

// TestMetricsAfterAWorkflow: /metrics exposes the named families once a
// workflow ran, and needs a token.
func TestMetricsAfterAWorkflow(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("greet", echoFlow)
	h.do("POST", "/v1/workflows/greet/instances?wait=30s", map[string]any{"input": map[string]any{"name": "x"}}).want(t, http.StatusCreated)
	h.request("GET", "/metrics", "", "", nil).want(t, http.StatusUnauthorized).problem(t)
	r := h.request("GET", "/metrics", readerSecret, "", nil).want(t, http.StatusOK)
	text := string(r.body)
	for _, want := range []string{
		`weft_activity_attempts_total{activity="upper",outcome="ok",plugin="kit"} 1`,
		`weft_activity_duration_seconds_count{activity="upper",outcome="ok",plugin="kit"} 1`,
		`weft_plugin_invocations_total{plugin="kit"} 1`,
		`weft_plugin_invocations_in_flight{plugin="kit"} 0`,
		`weft_plugin_pool_instances{plugin="kit",state="idle",version="`,
		`weft_plugin_pool_instances_created_total{plugin="kit",version="`,
		`weft_lock_acquisitions_total{key="workflow-instance",mode="acquire",result="acquired"}`,
		`weft_lock_acquire_duration_seconds_bucket{key="workflow-instance",mode="acquire"`,
		`weft_queue_depth `,
		`weft_instance_transitions_total{status="completed",workflow="greet"} 1`,
		`weft_instance_transitions_total{status="pending",workflow="greet"} 1`,
		`weft_step_duration_seconds_count{outcome="completed",step="up",workflow="greet"} 1`,
		`weft_heartbeat_capacity `,
		`weft_heartbeat_items{queue="main"} 0`,
		`weft_heartbeat_warnings{code="short_timeout"} 0`,
		`weft_http_requests_total{method="POST",route="/v1/workflows/:name/instances",status="201"} 1`,
		`weft_http_request_duration_seconds_count{method="PUT",route="/v1/plugins/:name"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if t.Failed() {
		t.Log(text)
	}
}

// TestMetricsOff: without a Gatherer /metrics answers 404.
func TestMetricsOff(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	srv, err := api.New(api.Config{}, h.node)
	if err != nil {
		t.Fatal(err)
	}
	res, err := srv.App().Test(httptestRequest("GET", "/metrics"), -1)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusNotFound || res.Header.Get("Content-Type") != apiv1.ProblemContentType {
		t.Fatalf("status %d, type %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
}

func httptestRequest(method, path string) *http.Request {
	req, _ := http.NewRequest(method, "http://127.0.0.1"+path, nil)
	return req
}

// TestShutdownBeforeServe: a Serve that comes after Shutdown returns at
// once and closes its listener, instead of serving for ever.
func TestShutdownBeforeServe(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	srv, err := api.New(api.Config{}, h.node)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Serve(ln); err != nil {
		t.Fatalf("Serve after Shutdown: %v", err)
	}
	if _, err := ln.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("the listener is still open: %v", err)
	}
}
