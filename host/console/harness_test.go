package console_test

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/hosttest"
)

// The tokens the test host is configured with (hosttest.Tokens): the
// operator's by its hash, so the console's dialog is given a secret the
// host only knows the hash of.
const (
	adminSecret    = hosttest.AdminToken
	operatorSecret = hosttest.OperatorToken
	readerSecret   = hosttest.ReaderToken
)

// host is the test host (internal/hosttest), whose API serves the console
// at /, bound to the test that started it.
type host struct {
	*hosttest.Host
	t   testing.TB
	url string
}

func newHost(t testing.TB) *host {
	t.Helper()
	h := hosttest.New(t, hosttest.Options{
		API: api.Config{Tokens: hosttest.Tokens()},
		Node: node.Config{
			// Attempts carry their input and output, so the timeline's
			// detail shows them; steps record their variables, as a
			// host does (history.vars_limit), so instances can be reset.
			// Heartbeats checked often, so a heartbeat_timeout of a
			// second is noticed in about one.
			Engine: engine.Config{AttemptDataLimit: 4096, VarsLimit: engine.DefaultVarsLimit,
				Heartbeat: heartbeat.Config{Tick: 20 * time.Millisecond, Cycle: 200 * time.Millisecond}},
		},
	})
	return &host{Host: h, t: t, url: h.URL}
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
	h.Do(h.t, "POST", path, map[string]any{"id": id, "input": input}).Want(h.t, http.StatusCreated).JSON(h.t, &in)
	return in
}

// get reads an instance.
func (h *host) get(id string) instance {
	h.t.Helper()
	var in instance
	h.Do(h.t, "GET", "/v1/instances/"+id, nil).Want(h.t, http.StatusOK).JSON(h.t, &in)
	return in
}

// awaitStatus waits, up to a minute, for the instance to have status.
func (h *host) awaitStatus(id, status string) instance {
	h.t.Helper()
	var in instance
	h.AwaitStatus(h.t, id, status, &in)
	return in
}
