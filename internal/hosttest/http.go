package hosttest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/testplugins"
)

// Response is an answer read whole.
type Response struct {
	Status int         // the HTTP status code
	Header http.Header // the answer's headers
	Body   []byte      // the whole body; nil for an event stream
}

// Want fails t unless r has status, and returns r.
func (r Response) Want(t testing.TB, status int) Response {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
	return r
}

// JSON decodes the body into v, or fails t.
func (r Response) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// Try sends a request to path (with its query) through h.HTTP, with the
// bearer token unless it is empty, and reads the answer. An event stream
// has no end to read to: its answer is the status and headers alone.
func (h *Host) Try(method, path, token, contentType string, body []byte) (Response, error) {
	req, err := http.NewRequest(method, h.URL+path, bytes.NewReader(body))
	if err != nil {
		return Response{}, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := h.HTTP.Do(req)
	if err != nil {
		return Response{}, err
	}
	defer res.Body.Close()
	if res.Header.Get("Content-Type") == "text/event-stream" {
		return Response{Status: res.StatusCode, Header: res.Header}, nil
	}
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return Response{}, fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// Request is Try that fails t when no answer comes.
func (h *Host) Request(t testing.TB, method, path, token, contentType string, body []byte) Response {
	t.Helper()
	r, err := h.Try(method, path, token, contentType, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// Do is Request as admin (AdminToken), with body as JSON unless it is nil.
func (h *Host) Do(t testing.TB, method, path string, body any) Response {
	t.Helper()
	var b []byte
	ct := ""
	if body != nil {
		var err error
		if b, err = json.Marshal(body); err != nil {
			t.Fatalf("encoding the body of %s %s: %v", method, path, err)
		}
		ct = "application/json"
	}
	return h.Request(t, method, path, AdminToken, ct, b)
}

// PushPlugin uploads the example plugin examples/plugins/name, built by
// testplugins, as a new plugin.
func (h *Host) PushPlugin(t testing.TB, name string) {
	t.Helper()
	h.Request(t, "PUT", "/v1/plugins/"+name, AdminToken, "application/wasm", testplugins.Bytes(t, name)).Want(t, http.StatusCreated)
}

// PutWorkflow saves a YAML definition as a new workflow.
func (h *Host) PutWorkflow(t testing.TB, name, yaml string) {
	t.Helper()
	h.Request(t, "PUT", "/v1/workflows/"+name, AdminToken, "application/yaml", []byte(yaml)).Want(t, http.StatusCreated)
}

// AwaitStatus waits, up to a minute, for the instance id (a path segment
// as it is written) to have status,
// then decodes it (GET /v1/instances/{id}) into v. For "suspended" and
// the terminal statuses each request asks the host to hold its answer
// until the instance gets that far (?wait=); for the others it polls.
func (h *Host) AwaitStatus(t testing.TB, id, status string, v any) {
	t.Helper()
	path := "/v1/instances/" + id
	switch status {
	case "suspended":
		path += "?wait=1s&until=suspended"
	case "completed", "failed", "cancelled":
		path += "?wait=1s"
	}
	deadline := time.Now().Add(time.Minute)
	for {
		r := h.Do(t, "GET", path, nil).Want(t, http.StatusOK)
		var in struct{ Status string }
		r.JSON(t, &in)
		if in.Status == status {
			r.JSON(t, v)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("instance %s is %s after a minute, want %s", id, in.Status, status)
		}
		time.Sleep(5 * time.Millisecond) // polling with a deadline
	}
}
