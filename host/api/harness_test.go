package api_test

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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/engine"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/logtest"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins"
)

// The test tokens: the operator's is configured by its hash.
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
// shared compilation cache, the engine running) behind the API on a real
// loopback listener.
type host struct {
	t        testing.TB
	url      string
	node     *node.Node
	srv      *api.Server
	logs     *logtest.Buffer
	workflow string        // the workflows_dir
	served   chan struct{} // closed when Serve returned, with serveErr
	serveErr error
	client   *http.Client
}

type hostOptions struct {
	api  api.Config
	node node.Config
	// debugLogs captures log lines of every level, not only Info and up.
	debugLogs bool
	// retention is the engine's Retention (0, the default: forever).
	retention time.Duration
	// attemptDataLimit is the engine's AttemptDataLimit (0, the default:
	// no attempt input or output in the history).
	attemptDataLimit int
}

func newHost(t testing.TB) *host {
	return newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}})
}

func newHostWith(t testing.TB, o hostOptions) *host {
	t.Helper()
	logs := &logtest.Buffer{}
	level := slog.LevelInfo
	if o.debugLogs {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: level}))
	reg := prometheus.NewRegistry()
	ncfg := o.node
	ncfg.DataDir = t.TempDir()
	if ncfg.WorkflowsDir == "" {
		ncfg.WorkflowsDir = t.TempDir()
	}
	ncfg.Plugins = plugins.Config{CacheDir: testplugins.CacheDir(t)}
	ncfg.Engine = engine.Config{NodeID: "n1", TimerInterval: 10 * time.Millisecond, Retention: o.retention, AttemptDataLimit: o.attemptDataLimit}
	ncfg.Registerer = reg
	n, err := node.Open(context.Background(), ncfg, log)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan struct{})
	go func() { _ = n.Run(ctx); close(ran) }()

	acfg := o.api
	if acfg.RequestTimeout == 0 {
		// An upload compiles its plugin within the request's time: under
		// -race, on a loaded two-core machine, with the package's other
		// tests compiling at once, that can pass the 30 s default.
		acfg.RequestTimeout = 3 * time.Minute
	}
	acfg.Logger = log
	acfg.Gatherer = reg
	srv, err := api.New(acfg, n)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &host{
		t: t, url: "http://" + ln.Addr().String(), node: n, srv: srv, logs: logs, workflow: ncfg.WorkflowsDir,
		served: make(chan struct{}), client: &http.Client{Transport: &http.Transport{}},
	}
	go func() { h.serveErr = srv.Serve(ln); close(h.served) }()
	t.Cleanup(func() {
		// The client's idle connections first: the server's Shutdown
		// waits for every open connection, and on a loaded machine
		// closing keep-alive ones from its side took longer than 10 s.
		h.client.CloseIdleConnections()
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		if err := srv.Shutdown(sctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
		select {
		case <-h.served:
			if h.serveErr != nil {
				t.Errorf("Serve: %v", h.serveErr)
			}
		case <-sctx.Done():
			t.Error("Serve did not return after Shutdown")
		}
		h.client.CloseIdleConnections()
		cancel()
		<-ran
		_ = n.Close()
	})
	return h
}

// response is an answer read whole.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.body, err)
	}
}

// problem decodes a problem answer and checks its shape.
func (r response) problem(t testing.TB) api.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != api.ProblemContentType {
		t.Fatalf("Content-Type = %q, want %q (status %d, body %s)", ct, api.ProblemContentType, r.status, r.body)
	}
	var p api.Problem
	r.json(t, &p)
	if p.Status != r.status || !strings.HasPrefix(p.Type, "urn:weft:problem:") || p.Title == "" || p.Detail == "" || p.RequestID == "" {
		t.Fatalf("malformed problem for status %d: %s", r.status, r.body)
	}
	return p
}

// request sends a request with the token (none when empty) and returns the
// answer.
func (h *host) request(method, path, token, contentType string, body []byte) response {
	h.t.Helper()
	r, err := h.try(method, path, token, contentType, body)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// try is request without failing the test on a transport error.
func (h *host) try(method, path, token, contentType string, body []byte) (response, error) {
	req, err := http.NewRequest(method, h.url+path, bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := h.client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Type") == "text/event-stream" {
		// An event stream has no end to read to: its headers are the
		// answer (openStream reads one).
		return response{status: res.StatusCode, header: res.Header}, nil
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{status: res.StatusCode, header: res.Header, body: b}, nil
}

// do is request as admin with a JSON body when body is not nil.
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

// pushKit uploads the kit plugin.
func (h *host) pushKit() {
	h.t.Helper()
	h.request("PUT", "/v1/plugins/kit", adminSecret, "application/wasm", testplugins.Bytes(h.t, "kit")).want(h.t, http.StatusCreated)
}

// putWorkflow saves a YAML definition.
func (h *host) putWorkflow(name, yaml string) {
	h.t.Helper()
	h.request("PUT", "/v1/workflows/"+name, adminSecret, "application/yaml", []byte(yaml)).want(h.t, http.StatusCreated)
}

// instance is the API's instance document.
type instance struct {
	ID        string          `json:"id"`
	Workflow  string          `json:"workflow"`
	Version   int             `json:"version"`
	Status    string          `json:"status"`
	Input     json.RawMessage `json:"input"`
	Output    json.RawMessage `json:"output"`
	Vars      json.RawMessage `json:"vars"`
	Error     json.RawMessage `json:"error"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
	WaitingOn *struct {
		Bookmarks []struct {
			Event    string `json:"event"`
			Key      string `json:"key"`
			StepPath string `json:"step_path"`
		} `json:"bookmarks"`
		Timers []struct {
			ID  string    `json:"id"`
			Due time.Time `json:"due"`
		} `json:"timers"`
	} `json:"waiting_on"`
}

// awaitStatus polls GET /v1/instances/{id} until the instance has status.
func (h *host) awaitStatus(id, status string) instance {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var in instance
		h.do("GET", "/v1/instances/"+id, nil).want(h.t, http.StatusOK).json(h.t, &in)
		if in.Status == status {
			return in
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("instance %s is %s after 30s, want %s", id, in.Status, status)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}

// writeWorkflowFile puts a definition into the workflows_dir.
func (h *host) writeWorkflowFile(file, yaml string) {
	h.t.Helper()
	if err := os.WriteFile(filepath.Join(h.workflow, file), []byte(yaml), 0o644); err != nil {
		h.t.Fatal(err)
	}
}

const echoFlow = `
name: greet
steps:
  - { id: up, activity: kit.upper, input: { text: "${ input.name }" }, output: up }
output: "${ vars.up.text }"
`

const approvalFlow = `
name: approval
steps:
  - { id: prep, activity: kit.echo, input: 1 }
  - id: review
    wait: { event: order.approved, key: "${ input.id }", timeout: 1h }
    output: approval
output: "${ vars.approval.by }"
`
