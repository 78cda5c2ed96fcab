package api_test

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/hosttest"
	"github.com/weftworks/weft/internal/logtest"
)

// The test tokens (hosttest.Tokens): the operator's is configured by its
// hash.
const (
	adminSecret    = hosttest.AdminToken
	operatorSecret = hosttest.OperatorToken
	readerSecret   = hosttest.ReaderToken
)

func testTokens() []api.Token { return hosttest.Tokens() }

// host is the test host (internal/hosttest) with the names the API's tests
// use.
type host struct {
	*hosttest.Host
	t        testing.TB
	url      string
	node     *node.Node
	srv      *api.Server
	logs     *logtest.Buffer
	workflow string          // the workflows_dir
	served   <-chan struct{} // closed when Serve returned, with serveErr
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
	ncfg := o.node
	ncfg.Engine.Retention, ncfg.Engine.AttemptDataLimit = o.retention, o.attemptDataLimit
	level := slog.LevelInfo
	if o.debugLogs {
		level = slog.LevelDebug
	}
	hh := hosttest.New(t, hosttest.Options{API: o.api, Node: ncfg, LogLevel: level})
	served := make(chan struct{})
	h := &host{
		Host: hh, t: t, url: hh.URL, node: hh.Node, srv: hh.Server, logs: hh.Logs, workflow: hh.WorkflowsDir,
		served: served, client: hh.HTTP,
	}
	// serveErr as a field, for the tests that read it once served is
	// closed.
	go func() { <-hh.Served(); h.serveErr = hh.ServeErr(); close(served) }()
	return h
}

// response is an answer read whole (hosttest.Response).
type response struct {
	status int
	header http.Header
	body   []byte
}

func fromHosttest(r hosttest.Response) response {
	return response{status: r.Status, header: r.Header, body: r.Body}
}

func (r response) json(t testing.TB, v any) {
	t.Helper()
	hosttest.Response{Body: r.body}.JSON(t, v)
}

// problem decodes a problem answer and checks its shape.
func (r response) problem(t testing.TB) apiv1.Problem {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != apiv1.ProblemContentType {
		t.Fatalf("Content-Type = %q, want %q (status %d, body %s)", ct, apiv1.ProblemContentType, r.status, r.body)
	}
	var p apiv1.Problem
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
	return fromHosttest(h.Request(h.t, method, path, token, contentType, body))
}

// try is request without failing the test on a transport error.
func (h *host) try(method, path, token, contentType string, body []byte) (response, error) {
	r, err := h.Try(method, path, token, contentType, body)
	return fromHosttest(r), err
}

// do is request as admin with a JSON body when body is not nil.
func (h *host) do(method, path string, body any) response {
	h.t.Helper()
	return fromHosttest(h.Do(h.t, method, path, body))
}

// want fails unless r has status.
func (r response) want(t testing.TB, status int) response {
	t.Helper()
	hosttest.Response{Status: r.status, Body: r.body}.Want(t, status)
	return r
}

// pushKit uploads the kit plugin.
func (h *host) pushKit() {
	h.t.Helper()
	h.PushPlugin(h.t, "kit")
}

// putWorkflow saves a YAML definition.
func (h *host) putWorkflow(name, yaml string) {
	h.t.Helper()
	h.PutWorkflow(h.t, name, yaml)
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

// awaitStatus waits until the instance has status.
func (h *host) awaitStatus(id, status string) instance {
	h.t.Helper()
	var in instance
	h.AwaitStatus(h.t, id, status, &in)
	return in
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
