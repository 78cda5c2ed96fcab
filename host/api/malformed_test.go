package api_test

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/internal/testplugins"
)

// forbiddenImportWAT is a plugin that is valid in every way but one: it
// imports a function the host does not grant.
const forbiddenImportWAT = `(module
  (import "weft" "result" (func $result (param i32 i32)))
  (import "env" "open_socket" (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 1024) "{\"activities\":[{\"name\":\"echo\"}]}")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 4096))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 1024) (i32.const 32)) (i32.const 0))
  (func (export "weft_invoke") (param $p i32) (param $a i32) (param $n i32) (result i32)
    (call $result (i32.add (local.get $p) (local.get $a)) (local.get $n)) (i32.const 0)))`

// TestMalformedInput: every kind of bad request gets its status and a
// problem body saying what and where, and the host stays healthy.
func TestMalformedInput(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), BodyLimit: 4 << 10}})
	h.pushKit()
	h.putWorkflow("greet", echoFlow)
	h.putWorkflow("approval", approvalFlow)
	var done, waiting instance
	h.do("POST", "/v1/workflows/greet/instances?wait=30s", map[string]any{"input": map[string]any{"name": "x"}, "id": "done-1"}).want(t, http.StatusCreated).json(t, &done)
	h.do("POST", "/v1/workflows/approval/instances?wait=30s&until=suspended", map[string]any{"input": map[string]any{"id": "k"}, "id": "waiting-1"}).want(t, http.StatusCreated).json(t, &waiting)
	if done.Status != "completed" || waiting.Status != "suspended" {
		t.Fatalf("setup: %s, %s", done.Status, waiting.Status)
	}
	forbidden := testplugins.WAT(t, forbiddenImportWAT)

	const yaml, jsonCT, wasm = "application/yaml", "application/json", "application/wasm"
	for _, tc := range []struct {
		name        string
		method      string
		path        string
		contentType string
		body        []byte
		status      int
		errPath     string // an errors[].path the problem must list
		detail      string // a substring of detail or of an errors[].message
	}{
		{"broken JSON", "POST", "/v1/events", jsonCT, []byte(`{"name": "a",`), 400, "$", "ends early"},
		{"JSON syntax", "POST", "/v1/workflows/greet/instances", jsonCT, []byte(`{"input": }`), 400, "$", "malformed JSON at byte"},
		{"unknown field", "POST", "/v1/workflows/greet/instances", jsonCT, []byte(`{"inptu": 1}`), 400, "inptu", "unknown field"},
		{"wrong JSON type", "POST", "/v1/events", jsonCT, []byte(`{"name": 5}`), 400, "name", "expected string"},
		{"trailing data", "POST", "/v1/events", jsonCT, []byte(`{"name": "a"} {}`), 400, "$", "after the JSON document"},
		{"event without name", "POST", "/v1/events", jsonCT, []byte(`{"key": "k"}`), 422, "name", "must not be empty"},
		{"event as text", "POST", "/v1/events", "text/plain", []byte(`{"name": "a"}`), 415, "", "text/plain"},
		{"event without type", "POST", "/v1/events", "", []byte(`{"name": "a"}`), 415, "", "Content-Type none"},
		{"plugin as JSON", "PUT", "/v1/plugins/kit", jsonCT, []byte(`{}`), 415, "", "application/wasm"},
		{"workflow as text", "PUT", "/v1/workflows/greet", "text/plain", []byte(echoFlow), 415, "", "application/yaml"},
		{"state as YAML", "PUT", "/v1/instances/done-1/state", yaml, []byte(`format: 1`), 415, "", "application/json"},
		{"oversized event", "POST", "/v1/events", jsonCT, []byte(`{"name": "` + strings.Repeat("a", 5<<10) + `"}`), 413, "", "at most 4096"},
		{"oversized workflow", "PUT", "/v1/workflows/greet", yaml, bytes.Repeat([]byte("# padding\n"), 600), 413, "", "at most 4096"},
		{"junk wasm", "PUT", "/v1/plugins/junk", wasm, []byte("this is not wasm"), 422, "module", "not a valid WebAssembly module"},
		{"empty wasm", "PUT", "/v1/plugins/junk", wasm, nil, 422, "module", ""},
		{"forbidden import", "PUT", "/v1/plugins/sneaky", wasm, forbidden, 422, "module", "open_socket"},
		{"bad plugin name", "PUT", "/v1/plugins/Bad.Name", wasm, testplugins.Bytes(t, "kit"), 400, "name", "starting with a letter"},
		{"bad YAML", "PUT", "/v1/workflows/greet", yaml, []byte("name: greet\nsteps: [ { id: a\n"), 422, "$", ""},
		{"unknown activity", "PUT", "/v1/workflows/greet", yaml, []byte("name: greet\nsteps:\n  - { id: a, activity: kit.nope }\n"), 422, "steps[0].activity", "nope"},
		{"name mismatch", "PUT", "/v1/workflows/other", yaml, []byte(echoFlow), 422, "name", `named "greet" but was sent to "other"`},
		{"unknown workflow", "POST", "/v1/workflows/nope/instances", jsonCT, []byte(`{}`), 404, "", `no workflow "nope"`},
		{"unknown workflow shown", "GET", "/v1/workflows/nope", "", nil, 404, "", `no workflow "nope"`},
		{"bad version", "GET", "/v1/workflows/greet?version=x", "", nil, 400, "version", "must be an integer"},
		{"unknown instance", "GET", "/v1/instances/nope", "", nil, 404, "", `no instance "nope"`},
		{"unknown history", "GET", "/v1/instances/nope/history", "", nil, 404, "", `no instance "nope"`},
		{"unknown cancel", "POST", "/v1/instances/nope/cancel", "", nil, 404, "", `no instance "nope"`},
		{"unknown delete", "DELETE", "/v1/instances/nope", "", nil, 404, "", `no instance "nope"`},
		{"unknown export", "GET", "/v1/instances/nope/state", "", nil, 404, "", `no instance "nope"`},
		{"unknown plugin", "GET", "/v1/plugins/nope", "", nil, 404, "", `no plugin "nope"`},
		{"unknown plugin deleted", "DELETE", "/v1/plugins/nope", "", nil, 404, "", `no plugin "nope"`},
		{"bad limit", "GET", "/v1/instances?limit=0", "", nil, 400, "limit", "from 1 to 1000"},
		{"bad status", "GET", "/v1/instances?status=sleeping", "", nil, 400, "status", "sleeping"},
		{"bad cursor", "GET", "/v1/instances?cursor=%%%", "", nil, 400, "", ""},
		{"bad after", "GET", "/v1/instances/done-1/history?after=x", "", nil, 400, "after", "sequence number"},
		{"bad wait", "POST", "/v1/workflows/greet/instances?wait=forever", jsonCT, []byte(`{}`), 400, "wait", "duration"},
		{"wait too long", "POST", "/v1/workflows/greet/instances?wait=1h", jsonCT, []byte(`{}`), 400, "wait", "5m0s"},
		{"bad instance id", "POST", "/v1/workflows/greet/instances", jsonCT, []byte(`{"id": "` + strings.Repeat("i", 300) + `"}`), 400, "id", "more than 256"},
		{"cancel finished", "POST", "/v1/instances/done-1/cancel", "", nil, 409, "", "completed already"},
		{"plugin in use", "DELETE", "/v1/plugins/kit?force=true", "", nil, 409, "", "waiting-1"},
		{"state format", "PUT", "/v1/instances/x/state", jsonCT, []byte(`{"format": 9, "instance": {"id": "x", "workflow": "greet", "status": "pending"}}`), 422, "format", "state format 1, got 9"},
		{"state of a missing workflow", "PUT", "/v1/instances/x/state", jsonCT, []byte(`{"format": 1, "instance": {"id": "x", "workflow": "nope", "version": 1, "status": "pending"}}`), 422, "instance", "nope"},
		{"refresh with junk", "POST", "/v1/admin/refresh", jsonCT, []byte(`{"workflows": [""]}`), 400, "workflows[0]", "must not be empty"},
		{"unknown route", "GET", "/v1/nothing", "", nil, 404, "", "no such route"},
		{"wrong method", "PATCH", "/v1/instances/done-1", "", nil, 405, "", "not with this method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := h.request(tc.method, tc.path, adminSecret, tc.contentType, tc.body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
			p := r.problem(t)
			text := p.Detail
			found := tc.errPath == ""
			for _, e := range p.Errors {
				text += "\n" + e.Message
				if e.Path == tc.errPath && e.Message != "" {
					found = true
				}
			}
			if !found {
				t.Fatalf("no error at path %q: %s", tc.errPath, r.body)
			}
			if !strings.Contains(text, tc.detail) {
				t.Fatalf("problem does not say %q: %s", tc.detail, r.body)
			}
			if tc.status == 405 && r.header.Get("Allow") != "GET, DELETE" {
				t.Fatalf("Allow = %q", r.header.Get("Allow"))
			}
		})
	}
	t.Cleanup(func() {
		// After all of it the host still serves.
		h.request("GET", "/healthz", "", "", nil).want(t, http.StatusOK)
		h.request("GET", "/readyz", "", "", nil).want(t, http.StatusOK)
		h.do("GET", "/v1/instances/done-1", nil).want(t, http.StatusOK)
	})
}

// TestDefinitionProblemsCarryPositions: a definition's problems come with
// their line and column.
func TestDefinitionProblemsCarryPositions(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	src := "name: greet\nsteps:\n  - id: a\n    activity: kit.echo\n    retry: { backoff: 0.5 }\n  - { id: a, activity: kit.echo }\n"
	p := h.request("PUT", "/v1/workflows/greet", adminSecret, "application/yaml", []byte(src)).want(t, http.StatusUnprocessableEntity).problem(t)
	if p.Type != "urn:weft:problem:validation" || len(p.Errors) < 2 {
		t.Fatalf("problem = %+v", p)
	}
	for _, e := range p.Errors {
		if e.Path == "" || e.Message == "" || e.Line == 0 {
			t.Fatalf("problem without path or position: %+v", e)
		}
	}
}

// TestDefinitionProblemsComeTogether: structural problems and references to
// unknown activities are reported in one answer (docs/architecture.md,
// "Every problem in one answer").
func TestDefinitionProblemsComeTogether(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	src := "name: greet\nsteps:\n  - { id: a, activity: kit.echo }\n  - { id: a, activity: kit.nope }\n"
	p := h.request("PUT", "/v1/workflows/greet", adminSecret, "application/yaml", []byte(src)).want(t, http.StatusUnprocessableEntity).problem(t)
	var dup, unknown bool
	for _, e := range p.Errors {
		dup = dup || strings.Contains(e.Message, "duplicate") || strings.Contains(e.Message, "already")
		unknown = unknown || e.Path == "steps[1].activity"
	}
	if !dup || !unknown {
		t.Fatalf("want the duplicate id and the unknown activity in one answer: %+v", p.Errors)
	}
}

// TestPluginOverServerLimit: a plugin over PluginBodyLimit is refused with
// a 413 problem that the client receives, however much it sends: up to
// twice the limit the server reads the body and refuses it; beyond, it
// refuses from the length alone (the client may then see a reset).
func TestPluginOverServerLimit(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), BodyLimit: 1 << 10, PluginBodyLimit: 64 << 10}})
	r := h.request("PUT", "/v1/plugins/kit", adminSecret, "application/wasm", testplugins.Bytes(t, "kit")[:100<<10])
	if p := r.want(t, http.StatusRequestEntityTooLarge).problem(t); !strings.Contains(p.Detail, "at most 65536") {
		t.Errorf("problem %+v; want the route's limit named", p)
	}
	h.request("GET", "/healthz", "", "", nil).want(t, http.StatusOK)
}

// TestRequestGuards: compressed bodies are refused (Fiber's c.Body()
// would inflate them past the limit); without tokens, only requests addressed to a
// loopback host and not sent by a web page elsewhere are served; every GET
// answers HEAD; a secret configured twice is refused.
func TestRequestGuards(t *testing.T) {
	t.Parallel()
	open := newHostWith(t, hostOptions{}) // no tokens
	closed := newHost(t)                  // tokens
	send := func(h *host, method, path, token string, header map[string]string, body string) response {
		t.Helper()
		req, err := http.NewRequest(method, h.url+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		for k, v := range header {
			if k == "Host" {
				req.Host = v
				continue
			}
			req.Header.Set(k, v)
		}
		res, err := h.client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return response{status: res.StatusCode, header: res.Header, body: b}
	}
	event := `{"name": "x"}`
	for _, tc := range []struct {
		name   string
		h      *host
		method string
		path   string
		token  string
		header map[string]string
		status int
	}{
		{"gzip body", closed, "POST", "/v1/events", operatorSecret, map[string]string{"Content-Type": "application/json", "Content-Encoding": "gzip"}, 415},
		{"identity encoding", closed, "POST", "/v1/events", operatorSecret, map[string]string{"Content-Type": "application/json", "Content-Encoding": "identity"}, 202},
		{"no tokens, loopback", open, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/json"}, 202},
		{"no tokens, localhost", open, "GET", "/v1/plugins", "", map[string]string{"Host": "localhost:8080"}, 200},
		{"no tokens, rebinding host", open, "GET", "/v1/plugins", "", map[string]string{"Host": "rebind.evil.example"}, 403},
		{"no tokens, foreign origin", open, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, 403},
		{"no tokens, loopback origin", open, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:3000"}, 202},
		{"no tokens, cross-site fetch", open, "POST", "/v1/events", "", map[string]string{"Content-Type": "application/json", "Sec-Fetch-Site": "cross-site"}, 403},
		{"tokens, any host", closed, "GET", "/v1/plugins", readerSecret, map[string]string{"Host": "weft.example"}, 200},
		{"HEAD probe", closed, "HEAD", "/healthz", "", nil, 200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := ""
			if tc.method == "POST" {
				body = event
			}
			r := send(tc.h, tc.method, tc.path, tc.token, tc.header, body)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
		})
	}
	if _, err := api.New(api.Config{Tokens: []api.Token{
		{Name: "plain", Role: api.RoleReader, Token: "s3cret"},
		{Name: "hashed", Role: api.RoleAdmin, Token: "sha256:" + fmt.Sprintf("%x", sha256.Sum256([]byte("s3cret")))},
	}}, closed.node); err == nil || !strings.Contains(err.Error(), "same secret") {
		t.Errorf("New with one secret under two roles: %v, want an error", err)
	}
}

// TestUploadIsAuthorisedBeforeItsBodyIsRead: whether a request may upload
// a plugin is decided from its headers, before its body is read: a request
// without a token, or with a reader's, is told so (401, 403), not that its
// body is too large for it (413), and cannot make the server read a
// plugin-sized body.
func TestUploadIsAuthorisedBeforeItsBodyIsRead(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens(), BodyLimit: 1 << 10, PluginBodyLimit: 64 << 10}})
	junk := bytes.Repeat([]byte{0x42}, 3<<10) // over twice BodyLimit, under PluginBodyLimit
	for _, tc := range []struct {
		name   string
		token  string
		status int
	}{
		{"no token", "", http.StatusUnauthorized},
		{"reader", readerSecret, http.StatusForbidden},
		{"admin", adminSecret, http.StatusUnprocessableEntity}, // read, then refused as junk
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := h.request("PUT", "/v1/plugins/junk", tc.token, "application/wasm", junk)
			if r.status != tc.status {
				t.Fatalf("status %d, want %d: %s", r.status, tc.status, r.body)
			}
		})
	}
}
