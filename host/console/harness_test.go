package console_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/engine"
	"github.com/weftworks/weft/host/heartbeat"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// The tokens the test host is configured with, as host/api's tests have
// them: the operator's by its hash, so the console's dialog is given a
// secret the host only knows the hash of.
const (
	adminSecret    = "admin-secret-0123456789"
	operatorSecret = "operator-secret-0123456789"
	readerSecret   = "reader-secret-0123456789"
)

func testTokens() []api.Token {
	sum := sha256.Sum256([]byte(operatorSecret))
	return []api.Token{
		{Name: "ci", Role: api.RoleAdmin, Token: adminSecret},
		{Name: "ops", Role: api.RoleOperator, Token: "sha256:" + hex.EncodeToString(sum[:])},
		{Name: "dash", Role: api.RoleReader, Token: readerSecret},
	}
}

// host is a real node (bbolt in a temp dir, the plugin runtime with the
// shared compilation cache, the engine running) behind the API, which
// serves the console at /, on a real loopback listener.
type host struct {
	t      testing.TB
	url    string
	client *http.Client
}

func newHost(t testing.TB) *host {
	t.Helper()
	logs := &logtest.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	reg := prometheus.NewRegistry()
	n, err := node.Open(context.Background(), node.Config{
		DataDir:      t.TempDir(),
		WorkflowsDir: t.TempDir(),
		Plugins:      plugins.Config{CacheDir: testplugins.CacheDir(t)},
		// Attempts carry their input and output, so the timeline's
		// detail shows them.
		// Heartbeats checked often, so a heartbeat_timeout of a second
		// is noticed in about one.
		Engine: engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, AttemptDataLimit: 4096,
			Heartbeat: heartbeat.Config{Tick: 20 * time.Millisecond, Cycle: 200 * time.Millisecond}},
		Registerer: reg,
	}, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = n.Run(ctx); close(ran) }()

	srv, err := api.New(api.Config{
		Tokens: testTokens(),
		// An upload compiles its plugin within the request's time: under
		// -race on a loaded machine that can pass the 30 s default.
		RequestTimeout: 3 * time.Minute,
		Logger:         log,
		Gatherer:       reg,
	}, n)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &host{t: t, url: "http://" + ln.Addr().String(), client: &http.Client{Transport: &http.Transport{}}}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	t.Cleanup(func() {
		h.client.CloseIdleConnections()
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case err := <-served:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-sctx.Done():
			t.Error("Serve did not return after Shutdown")
		}
		cancel()
		<-ran
		_ = n.Close()
		if t.Failed() {
			t.Logf("host log:\n%s", logs.String())
		}
	})
	return h
}

// response is an answer read whole.
type response struct {
	status int
	body   []byte
}

// request sends a request with the token and returns the answer.
func (h *host) request(method, path, token, contentType string, body []byte) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return response{status: res.StatusCode, body: b}
}

// do is request as admin, with body as JSON unless it is nil.
func (h *host) do(method, path string, body any) response {
	h.t.Helper()
	var b []byte
	ct := ""
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			h.t.Fatal(err)
		}
		ct = "application/json"
	}
	return h.request(method, path, adminSecret, ct, b)
}

// want fails unless r has status.
func (r response) want(t testing.TB, status int) response {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
	return r
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// pushPlugin uploads the example plugin name, built from examples/plugins.
func (h *host) pushPlugin(name string) {
	h.t.Helper()
	h.request("PUT", "/v1/plugins/"+name, adminSecret, "application/wasm", testplugins.Bytes(h.t, name)).want(h.t, http.StatusCreated)
}

// putWorkflow saves a YAML definition.
func (h *host) putWorkflow(name, yaml string) {
	h.t.Helper()
	h.request("PUT", "/v1/workflows/"+name, adminSecret, "application/yaml", []byte(yaml)).want(h.t, http.StatusCreated)
}

// instance is the part of the API's instance document the tests read.
type instance struct {
	ID       string          `json:"id"`
	Workflow string          `json:"workflow"`
	Status   string          `json:"status"`
	Output   json.RawMessage `json:"output"`
	Error    json.RawMessage `json:"error"`
}

// start starts an instance of workflow with id and input. With until
// ("ended" or "suspended") the answer waits, up to a minute, for the
// instance to get that far; with "" it comes at once.
func (h *host) start(workflow, id string, input any, until string) instance {
	h.t.Helper()
	path := "/v1/workflows/" + workflow + "/instances"
	if until != "" {
		path += "?wait=60s&until=" + until
	}
	var in instance
	h.do("POST", path, map[string]any{"id": id, "input": input}).want(h.t, http.StatusCreated).json(h.t, &in)
	return in
}

// get reads an instance.
func (h *host) get(id string) instance {
	h.t.Helper()
	var in instance
	h.do("GET", "/v1/instances/"+id, nil).want(h.t, http.StatusOK).json(h.t, &in)
	return in
}

// awaitStatus waits, up to a minute, for the instance to have status,
// asking the host to hold each answer until the instance changes.
func (h *host) awaitStatus(id, status string) instance {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var in instance
		h.do("GET", "/v1/instances/"+id+"?wait=1s", nil).want(h.t, http.StatusOK).json(h.t, &in)
		if in.Status == status {
			return in
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("instance %s is %s after a minute, want %s", id, in.Status, status)
		}
	}
}
