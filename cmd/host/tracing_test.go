package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
	"github.com/weftworks/weft/internal/otlptest"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/internal/tracing"
)

// The tracing tests run real `weft serve` processes exporting to a real
// OTLP receiver (internal/otlptest) and check the traces a user's
// collector would get: what joins a caller's trace, what is whose parent,
// and that an instance's trace outlives the node that started it.

// startTraced starts `weft serve` as startProcess does, with env added to
// the test's environment once its OTEL_* and WEFT_TRACING_* variables are
// removed (so that only what the test says configures the traces). It
// returns the process, whose log a goroutine keeps the end of (shown if
// the test fails), and its "weft is serving" line.
func startTraced(t *testing.T, bin string, env []string, args ...string) (*serveProcess, map[string]any) {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"serve", "--listen", "127.0.0.1:0", "--log-format", "json"}, args...)...)
	cmd.Dir = t.TempDir()
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OTEL_") && !strings.HasPrefix(kv, "WEFT_TRACING_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", bin, err)
	}
	p := &serveProcess{cmd: cmd, lines: make(chan map[string]any, 1000), exit: make(chan error, 1)}
	var mu sync.Mutex
	var tail []string
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			mu.Lock()
			if tail = append(tail, sc.Text()); len(tail) > 60 {
				tail = tail[1:]
			}
			mu.Unlock()
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				p.lines <- m
			}
		}
		close(p.lines)
		p.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("the end of the log of weft serve %v:\n%s", args, strings.Join(tail, "\n"))
		}
	})
	serving := p.waitLog(t, "weft is serving")
	p.addr = serving["addr"].(string)
	go drain(p)
	return p, serving
}

// randomHex is n random bytes in hex: a trace or span id of the caller's.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// startJoined starts an instance of workflow with POST .../instances
// carrying traceparent, as a traced caller does, and returns it as the
// API answers: at once when wait is 0, else once it has ended (or wait
// has run out).
func startJoined(t *testing.T, addr, workflow string, input json.RawMessage, traceparent string, wait time.Duration) *apiv1.Instance {
	t.Helper()
	body, err := json.Marshal(apiv1.StartRequest{Input: input})
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + addr + "/v1/workflows/" + url.PathEscape(workflow) + "/instances"
	if wait > 0 {
		u += "?wait=" + wait.String()
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait+60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("traceparent", traceparent)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("starting %s with traceparent %s: %v", workflow, traceparent, err)
	}
	defer resp.Body.Close()
	var inst apiv1.Instance
	if err := json.NewDecoder(resp.Body).Decode(&inst); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("starting %s: %s, decoding: %v", workflow, resp.Status, err)
	}
	return &inst
}

// spanQuery selects received spans.
type spanQuery []otlptest.Span

// where is the spans f accepts.
func (q spanQuery) where(f func(otlptest.Span) bool) spanQuery {
	var out spanQuery
	for _, s := range q {
		if f(s) {
			out = append(out, s)
		}
	}
	return out
}

// named is the spans called name.
func (q spanQuery) named(name string) spanQuery {
	return q.where(func(s otlptest.Span) bool { return s.Name == name })
}

// attr is the spans whose attribute key is v.
func (q spanQuery) attr(key string, v any) spanQuery {
	return q.where(func(s otlptest.Span) bool { return s.Attributes[key] == v })
}

// from is the spans node exported (their resource's service.instance.id).
func (q spanQuery) from(node string) spanQuery {
	return q.where(func(s otlptest.Span) bool { return s.Resource["service.instance.id"] == node })
}

// one is the only span of q, or fails t naming what.
func (q spanQuery) one(t *testing.T, what string) otlptest.Span {
	t.Helper()
	if len(q) != 1 {
		t.Fatalf("%s: %d spans, want 1: %s", what, len(q), q)
	}
	return q[0]
}

// String lists the spans for a failure message.
func (q spanQuery) String() string {
	var b strings.Builder
	for _, s := range q {
		fmt.Fprintf(&b, "\n  %s %s trace %s span %s parent %s node %v %v", s.Name, s.Kind, s.TraceID, s.SpanID, s.ParentSpanID, s.Resource["service.instance.id"], s.Attributes)
	}
	return b.String()
}

// hasEvent reports whether s has an event called name whose attributes
// include attrs.
func hasEvent(s otlptest.Span, name string, attrs map[string]any) bool {
	for _, e := range s.Events {
		if e.Name != name {
			continue
		}
		ok := true
		for k, v := range attrs {
			ok = ok && e.Attributes[k] == v
		}
		if ok {
			return true
		}
	}
	return false
}

// tracedWorkflow has a step whose activity fails once and succeeds on its
// retry, a step whose plugin calls input.url, and a step that returns its
// attempt's info (with its trace context).
const tracedWorkflow = `
name: traced
steps:
  - { id: flaky, activity: kit.fail, input: { code: flaky, message: once, retryable: true, fail_attempts: 1 }, retry: { max_attempts: 3, initial_interval: 10ms }, output: flaky }
  - { id: call, activity: probe.do, input: { method: GET, url: "${ input.url }" }, retry: { max_attempts: 1 }, output: call }
  - { id: info, activity: kit.info, retry: { max_attempts: 1 }, output: info }
output: { flaky: "${ vars.flaky }", call: "${ vars.call }", info: "${ vars.info }" }
`

// TestTracingEndToEnd: a host exporting to a collector (over OTLP/HTTP
// configured by its keys, shut down gracefully, which flushes its spans;
// over gRPC configured by the standard OTEL_* variables, with a short
// batch delay) runs an instance started by a traced caller. The
// collector gets one trace, the caller's: the API request's server span
// under the caller's span, the instance's under the request's, its steps'
// under the instance's, each attempt under its step's (a retried step's
// two, the first failed with its code), the outbound request's client
// span under its attempt's, whose ids the called server got in its
// traceparent; the turns' spans with their commits; the attempt's ids in
// the plugin's info. Every span names service weft.
func TestTracingEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts host processes")
	}
	t.Parallel()
	bin := buildWeft(t)
	probeWasm, err := os.ReadFile(testplugins.Testdata(t, "plugins/testdata/httpprobe"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		// config is the arguments and the environment that turn tracing
		// on, toward the receiver.
		config func(r *otlptest.Receiver) (args, env []string)
		// protocol is what the serving line says.
		protocol string
		// shutdown: stop the host (SIGTERM) before reading the spans,
		// which its shutdown flushes; otherwise wait for them while it
		// runs.
		shutdown bool
	}{
		{
			name: "OTLP/HTTP from the tracing keys, flushed at shutdown",
			config: func(r *otlptest.Receiver) ([]string, []string) {
				return []string{"--set", "tracing.exporter=otlp", "--set", "tracing.endpoint=" + r.HTTPEndpoint(), "--set", "tracing.protocol=http/protobuf"}, nil
			},
			protocol: "http/protobuf",
			shutdown: true,
		},
		{
			name: "OTLP/gRPC from the OTEL variables",
			config: func(r *otlptest.Receiver) ([]string, []string) {
				return nil, []string{"OTEL_TRACES_EXPORTER=otlp", "OTEL_EXPORTER_OTLP_ENDPOINT=http://" + r.GRPCEndpoint(),
					"OTEL_EXPORTER_OTLP_PROTOCOL=grpc", "OTEL_BSP_SCHEDULE_DELAY=100"}
			},
			protocol: "grpc",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			recv := otlptest.Start(t)
			var mu sync.Mutex
			var got []string // the traceparent of each request the called server got
			hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				got = append(got, r.Header.Get("traceparent"))
				mu.Unlock()
				fmt.Fprint(w, "ok")
			}))
			t.Cleanup(hook.Close)

			args, env := tc.config(recv)
			p, serving := startTraced(t, bin, env, append([]string{"--data-dir", t.TempDir(), "--set", "plugins.cache_dir=" + testplugins.CacheDir(t)}, args...)...)
			if serving["tracing"] != tc.protocol {
				t.Errorf("the serving line says tracing %v, want %s: %v", serving["tracing"], tc.protocol, serving)
			}
			c, err := client.New(client.Config{Server: "http://" + p.addr})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if _, _, err := c.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.PutPlugin(ctx, "probe", probeWasm); err != nil {
				t.Fatal(err)
			}
			if _, err := c.PutGrants(ctx, "probe", apiv1.GrantDocument{Hosts: []apiv1.GrantHost{{Pattern: "http://127.0.0.1:*", PrivateNetworks: true}}}); err != nil {
				t.Fatal(err)
			}
			if _, _, err := c.PutWorkflow(ctx, "traced", []byte(tracedWorkflow)); err != nil {
				t.Fatal(err)
			}

			traceID, callerSpan := randomHex(t, 16), randomHex(t, 8)
			input, _ := json.Marshal(map[string]string{"url": hook.URL + "/hook"})
			inst := startJoined(t, p.addr, "traced", input, "00-"+traceID+"-"+callerSpan+"-01", 2*time.Minute)
			var out struct {
				Call []struct {
					Status int `json:"status"`
				} `json:"call"`
				Info struct {
					TraceID string `json:"trace_id"`
					SpanID  string `json:"span_id"`
				} `json:"info"`
			}
			if inst.Status != apiv1.StatusCompleted || json.Unmarshal(inst.Output, &out) != nil || len(out.Call) != 1 || out.Call[0].Status != http.StatusOK {
				t.Fatalf("instance %s: %s %s %+v; want completed, the call answered 200", inst.ID, inst.Status, inst.Output, inst.Error)
			}

			if tc.shutdown {
				if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if code := p.wait(t); code != exitOK {
					t.Fatalf("exit %d after SIGTERM, want 0", code)
				}
			}
			// Everything the instance and its request make: the request's
			// span ends last, once the instance has ended.
			complete := func(spans []otlptest.Span) bool {
				q := spanQuery(spans).where(func(s otlptest.Span) bool { return s.TraceID == traceID })
				return len(q.named("weft.instance")) == 1 && len(q.named("weft.step")) == 3 && len(q.named("weft.attempt")) == 4 &&
					len(q.named("HTTP GET")) == 1 && len(q.where(func(s otlptest.Span) bool { return s.Kind == "SERVER" })) == 1
			}
			wait := 60 * time.Second
			if tc.shutdown {
				wait = 5 * time.Second // flushed before the process exited
			}
			all := spanQuery(recv.WaitForSpans(t, complete, wait))
			spans := all.where(func(s otlptest.Span) bool { return s.TraceID == traceID })
			if t.Failed() {
				return
			}

			for _, s := range all {
				if s.Resource["service.name"] != "weft" {
					t.Errorf("span %s has service.name %v, want weft", s.Name, s.Resource["service.name"])
				}
			}
			request := spans.where(func(s otlptest.Span) bool { return s.Kind == "SERVER" }).one(t, "the request's span")
			if request.ParentSpanID != callerSpan || !strings.HasPrefix(request.Name, "POST ") || !strings.HasSuffix(request.Name, "/instances") {
				t.Errorf("the request's span %q has parent %s, want POST …/instances under the caller's span %s", request.Name, request.ParentSpanID, callerSpan)
			}
			instance := spans.named("weft.instance").one(t, "the instance's span")
			if instance.ParentSpanID != request.SpanID || instance.Attributes["weft.instance.id"] != inst.ID || instance.Attributes["weft.status"] != "completed" {
				t.Errorf("the instance's span: parent %s, attributes %v; want under the request's span %s, instance %s completed",
					instance.ParentSpanID, instance.Attributes, request.SpanID, inst.ID)
			}

			steps := map[string]otlptest.Span{}
			for _, id := range []string{"flaky", "call", "info"} {
				s := spans.named("weft.step").attr("weft.step.id", id).one(t, "the span of step "+id)
				if s.ParentSpanID != instance.SpanID || s.Attributes["weft.outcome"] != "completed" {
					t.Errorf("step %s's span: parent %s, attributes %v; want completed under the instance's span %s", id, s.ParentSpanID, s.Attributes, instance.SpanID)
				}
				steps[id] = s
				for _, a := range spans.named("weft.attempt").attr("weft.step.id", id) {
					if a.ParentSpanID != s.SpanID {
						t.Errorf("attempt %v of step %s has parent %s, want the step's span %s", a.Attributes["weft.attempt"], id, a.ParentSpanID, s.SpanID)
					}
				}
			}
			if n := steps["flaky"].Attributes["weft.attempts"]; n != int64(2) {
				t.Errorf("the retried step's span says %v attempts, want 2", n)
			}

			// The retried step: attempt 1 failed with its code, 2 completed.
			flaky := spans.named("weft.attempt").attr("weft.step.id", "flaky")
			first := flaky.attr("weft.attempt", int64(1)).one(t, "the retried step's attempt 1")
			second := flaky.attr("weft.attempt", int64(2)).one(t, "the retried step's attempt 2")
			if first.Attributes["weft.outcome"] != "failed" || first.Attributes["weft.failure.code"] != "flaky" || first.StatusCode != "ERROR" {
				t.Errorf("attempt 1: %v, status %s; want failed with code flaky, an error", first.Attributes, first.StatusCode)
			}
			if second.Attributes["weft.outcome"] != "completed" || second.StatusCode == "ERROR" {
				t.Errorf("attempt 2: %v, status %s; want completed", second.Attributes, second.StatusCode)
			}
			for _, a := range []otlptest.Span{first, second} {
				if a.Attributes["weft.plugin"] != "kit" || a.Attributes["weft.activity"] != "fail" || a.Attributes["weft.plugin.version"] == "" || a.Attributes["weft.plugin.version"] == nil {
					t.Errorf("attempt %v names %v/%v version %v; want kit's fail and its version", a.Attributes["weft.attempt"],
						a.Attributes["weft.plugin"], a.Attributes["weft.activity"], a.Attributes["weft.plugin.version"])
				}
			}

			// The outbound request: a client span under its attempt, whose
			// ids the called server got.
			callAttempt := spans.named("weft.attempt").attr("weft.step.id", "call").one(t, "the call step's attempt")
			hop := spans.named("HTTP GET").one(t, "the outbound request's span")
			if hop.Kind != "CLIENT" || hop.ParentSpanID != callAttempt.SpanID {
				t.Errorf("the outbound span: kind %s, parent %s; want a client span under the attempt's %s", hop.Kind, hop.ParentSpanID, callAttempt.SpanID)
			}
			mu.Lock()
			received := append([]string(nil), got...)
			mu.Unlock()
			if want := "00-" + traceID + "-" + hop.SpanID + "-01"; len(received) != 1 || received[0] != want {
				t.Errorf("the called server got traceparent %q, want [%s]: the caller's trace, the outbound span", received, want)
			}

			// The plugin's info names its attempt's span.
			infoAttempt := spans.named("weft.attempt").attr("weft.step.id", "info").one(t, "the info step's attempt")
			if out.Info.TraceID != traceID || out.Info.SpanID != infoAttempt.SpanID {
				t.Errorf("info gave trace %q span %q, want %s %s (its attempt's span)", out.Info.TraceID, out.Info.SpanID, traceID, infoAttempt.SpanID)
			}

			// The turns: under the instance's span, their commits as events.
			runs := spans.named(tracing.SpanExecution)
			commits := 0
			for _, r := range runs {
				if r.ParentSpanID != instance.SpanID {
					t.Errorf("a turn's span has parent %s, want the instance's %s", r.ParentSpanID, instance.SpanID)
				}
				if hasEvent(r, "commit", nil) {
					commits++
				}
			}
			if commits == 0 {
				t.Errorf("no turn's span has a commit event:%s", runs)
			}
			if t.Failed() {
				t.Logf("the trace's spans:%s", spans)
			}
		})
	}
}

// TestTracingContinuesAcrossAKilledNode: two nodes on one Redis export to
// one collector, each batch at once. An instance started by a traced
// caller runs a long step on a node that is killed (SIGKILL) in the
// middle of it, after its first spans were exported; the other node
// takes the instance over and finishes it. Every span of the instance,
// from either node, is in the caller's trace; the instance's span, which
// the survivor emits, has the ids fixed when it was created (under the
// request's span) and is the parent of the steps both nodes ran; the
// survivor's turn records the takeover from the dead node, and its
// attempt is a child of the step's span it emits at the end.
func TestTracingContinuesAcrossAKilledNode(t *testing.T) {
	t.Parallel()
	bin := clusterBinary(t)
	srv := redistest.Start(t)
	recv := otlptest.Start(t)
	cache := testplugins.CacheDir(t)
	var hosts []*clusterHost
	for i := range 2 {
		id := fmt.Sprintf("node%d", i+1)
		// The settings of startCluster, and traces exported every 50ms:
		// the killed node's unexported spans are lost with it.
		p, _ := startTraced(t, bin, []string{"OTEL_BSP_SCHEDULE_DELAY=50"},
			"--store", "redis", "--redis-addr", srv.Addr(), "--node-id", id,
			"--data-dir", t.TempDir(), "--set", "plugins.cache_dir="+cache,
			"--set", "engine.lock_ttl=6s", "--set", "engine.recovery_interval=200ms",
			"--set", "heartbeat.tick=25ms", "--set", "heartbeat.cycle=250ms",
			"--set", "tracing.exporter=otlp", "--set", "tracing.endpoint="+recv.HTTPEndpoint())
		c, err := client.New(client.Config{Server: "http://" + p.addr})
		if err != nil {
			t.Fatal(err)
		}
		hosts = append(hosts, &clusterHost{id: id, p: p, c: c})
	}
	st := openRedisStore(t, srv)
	deploy(t, hosts[0], "handover", `
name: handover
steps:
  - { id: first, activity: kit.echo, input: "${ input }", output: first }
  - { id: work, activity: kit.work, input: { ms: 12000, beat_ms: 20 }, heartbeat_timeout: 10s, output: work }
output: "${ vars.work }"
`)
	traceID, callerSpan := randomHex(t, 16), randomHex(t, 8)
	inst := startJoined(t, hosts[0].p.addr, "handover", json.RawMessage(`"x"`), "00-"+traceID+"-"+callerSpan+"-01", 0)
	inTrace := func(spans []otlptest.Span) spanQuery {
		return spanQuery(spans).where(func(s otlptest.Span) bool { return s.TraceID == traceID })
	}

	var owner string
	until(t, 60*time.Second, "instance "+inst.ID+" working, its details stored", func() bool {
		owner = runsOn(history(t, hosts[0], inst.ID))
		return owner != "" && heartbeatsStored(t, st, inst.ID)
	})
	victim, survivor := hosts[0], hosts[1]
	if owner == survivor.id {
		victim, survivor = survivor, victim
	}
	// What is exported before the kill: the request's span, the first
	// step's and its attempt's (the long step's attempt and the turn do
	// not end on the victim).
	before := inTrace(recv.WaitForSpans(t, func(spans []otlptest.Span) bool {
		q := inTrace(spans)
		return len(q.where(func(s otlptest.Span) bool { return s.Kind == "SERVER" })) == 1 &&
			len(q.named("weft.step").attr("weft.step.id", "first")) == 1
	}, 30*time.Second))
	if err := victim.p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	t.Logf("instance %s ran on %s, killed; spans exported before:%s", inst.ID, victim.id, before)

	var fin *apiv1.Instance
	until(t, 90*time.Second, "instance "+inst.ID+" finished by "+survivor.id, func() bool {
		var err error
		fin, err = survivor.c.Instance(context.Background(), inst.ID)
		return err == nil && fin.Terminal()
	})
	var out workOut
	if fin.Status != apiv1.StatusCompleted || json.Unmarshal(fin.Output, &out) != nil || out.Attempt != 2 {
		t.Fatalf("instance %s: %s %s %+v; want completed by attempt 2 on %s", inst.ID, fin.Status, fin.Output, fin.Error, survivor.id)
	}

	spans := inTrace(recv.WaitForSpans(t, func(spans []otlptest.Span) bool {
		q := inTrace(spans).from(survivor.id)
		return len(q.named("weft.instance")) == 1 && len(q.named("weft.step").attr("weft.step.id", "work")) == 1 &&
			len(q.named("weft.attempt").attr("weft.step.id", "work")) > 0
	}, 60*time.Second))
	// Every span of the instance, from either node, is in the caller's
	// trace.
	for _, s := range recv.Spans() {
		if id, ok := s.Attributes["weft.instance.id"]; ok && id == inst.ID && s.TraceID != traceID {
			t.Errorf("span %s of %v is in trace %s, want the caller's %s", s.Name, s.Resource["service.instance.id"], s.TraceID, traceID)
		}
	}
	if len(spans.from(victim.id)) == 0 {
		t.Errorf("no span of the killed node %s arrived before it died:%s", victim.id, spans)
	}

	request := spans.where(func(s otlptest.Span) bool { return s.Kind == "SERVER" }).one(t, "the request's span")
	if request.ParentSpanID != callerSpan || request.Resource["service.instance.id"] != hosts[0].id {
		t.Errorf("the request's span: parent %s, node %v; want under the caller's span %s, on %s", request.ParentSpanID, request.Resource["service.instance.id"], callerSpan, hosts[0].id)
	}
	instance := spans.named("weft.instance").one(t, "the instance's span")
	if instance.ParentSpanID != request.SpanID || instance.Resource["service.instance.id"] != survivor.id {
		t.Errorf("the instance's span: parent %s, node %v; want under the request's span %s, from %s", instance.ParentSpanID, instance.Resource["service.instance.id"], request.SpanID, survivor.id)
	}
	for _, id := range []string{"first", "work"} {
		s := spans.named("weft.step").attr("weft.step.id", id).one(t, "the span of step "+id)
		if s.ParentSpanID != instance.SpanID {
			t.Errorf("step %s's span (from %v) has parent %s, want the instance's span %s", id, s.Resource["service.instance.id"], s.ParentSpanID, instance.SpanID)
		}
	}
	work := spans.named("weft.step").attr("weft.step.id", "work").one(t, "the long step's span")
	if work.Resource["service.instance.id"] != survivor.id || work.Attributes["weft.outcome"] != "completed" {
		t.Errorf("the long step's span: node %v, attributes %v; want completed, from %s", work.Resource["service.instance.id"], work.Attributes, survivor.id)
	}
	attempts := spans.named("weft.attempt").attr("weft.step.id", "work")
	if len(attempts.from(survivor.id).attr("weft.attempt", int64(2))) != 1 {
		t.Errorf("the long step's attempt spans:%s\nwant attempt 2 from %s", attempts, survivor.id)
	}
	for _, a := range attempts {
		if a.ParentSpanID != work.SpanID {
			t.Errorf("attempt %v of the long step (from %v) has parent %s, want the step's span %s", a.Attributes["weft.attempt"], a.Resource["service.instance.id"], a.ParentSpanID, work.SpanID)
		}
	}
	takeovers := spans.named(tracing.SpanExecution).from(survivor.id).where(func(s otlptest.Span) bool {
		return hasEvent(s, "takeover", map[string]any{"weft.previous_node": victim.id})
	})
	if len(takeovers) == 0 {
		t.Errorf("no turn of %s records taking the instance over from %s:%s", survivor.id, victim.id, spans.named(tracing.SpanExecution))
	}
	for _, r := range spans.named(tracing.SpanExecution) {
		if r.ParentSpanID != instance.SpanID {
			t.Errorf("a turn's span (from %v) has parent %s, want the instance's %s", r.Resource["service.instance.id"], r.ParentSpanID, instance.SpanID)
		}
	}
	if t.Failed() {
		t.Logf("the trace's spans:%s", spans)
	}
}
