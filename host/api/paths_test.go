package api_test

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
)

// setFlow runs no plugin, so that a test of paths needs none uploaded.
const setFlow = `
name: setter
steps:
  - { id: s, set: { x: 1 } }
output: "${ vars.x }"
`

// TestPathParamsArePercentDecoded: an instance whose id needs escaping in
// a URL (a space, a '/', a '%', a non-ASCII letter) is started with that id
// in the body and then read, listed by its history, exported and deleted
// through paths that carry the id escaped as one segment. A literal '+'
// stays a '+' (a path is not a query). Names are decoded too.
func TestPathParamsArePercentDecoded(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("setter", setFlow)

	for _, id := range []string{"a b", "orders/1001", "x/history", "50%+tax", "café", "a+b"} {
		var started instance
		h.do("POST", "/v1/workflows/setter/instances?wait=30s", map[string]any{"id": id}).want(t, http.StatusCreated).json(t, &started)
		if started.ID != id || started.Status != "completed" {
			t.Fatalf("start with id %q answered %+v", id, started)
		}
		at := "/v1/instances/" + url.PathEscape(id)
		var shown instance
		h.do("GET", at, nil).want(t, http.StatusOK).json(t, &shown)
		if shown.ID != id || string(shown.Output) != "1" {
			t.Fatalf("GET %s answered %+v, want instance %q", at, shown, id)
		}
		var hist pageDoc[struct {
			Type string `json:"type"`
		}]
		h.do("GET", at+"/history", nil).want(t, http.StatusOK).json(t, &hist)
		if len(hist.Items) == 0 || hist.Items[len(hist.Items)-1].Type != "instance_completed" {
			t.Fatalf("GET %s/history answered %+v", at, hist)
		}
		if p := h.do("POST", at+"/cancel", nil).want(t, http.StatusConflict).problem(t); !strings.Contains(p.Detail, `"`+id+`"`) {
			t.Fatalf("cancelling finished instance %q: detail %q does not name it", id, p.Detail)
		}
		state := h.do("GET", at+"/state", nil).want(t, http.StatusOK)
		h.request("PUT", at+"/state?replace=true", adminSecret, "application/json", state.body).want(t, http.StatusOK)
		h.do("DELETE", at, nil).want(t, http.StatusNoContent)
		if p := h.do("GET", at, nil).want(t, http.StatusNotFound).problem(t); !strings.Contains(p.Detail, `"`+id+`"`) {
			t.Fatalf("GET %s after delete: detail %q does not name %q", at, p.Detail, id)
		}
	}

	// A name is decoded as well: the 404 names what was asked for.
	if p := h.do("GET", "/v1/workflows/no%20such", nil).want(t, http.StatusNotFound).problem(t); !strings.Contains(p.Detail, `"no such"`) {
		t.Fatalf("GET /v1/workflows/no%%20such: detail %q", p.Detail)
	}
	var wf workflowDoc
	h.do("GET", "/v1/workflows/%73etter", nil).want(t, http.StatusOK).json(t, &wf)
	if wf.Name != "setter" {
		t.Fatalf("GET /v1/workflows/%%73etter answered %+v", wf)
	}
}

// TestPathParamsRefusedLikeAtCreation: a path parameter that is not
// percent-encoding, that is not UTF-8 once decoded, or an id that a start
// would refuse (over 256 bytes) is a 400 naming the parameter, with the
// message a start gives for the same id.
func TestPathParamsRefusedLikeAtCreation(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("setter", setFlow)

	for _, path := range []string{"/v1/instances/%zz", "/v1/instances/a%2", "/v1/instances/%FF/history", "/v1/workflows/%zz"} {
		p := h.rawPath("GET", path).want(t, http.StatusBadRequest).problem(t)
		if p.Type != "urn:weft:problem:invalid-request" || len(p.Errors) != 1 || (p.Errors[0].Path != "id" && p.Errors[0].Path != "name") {
			t.Fatalf("GET %s: %+v, want an invalid-request problem naming the parameter", path, p)
		}
	}

	long := strings.Repeat("x", 257)
	atStart := h.do("POST", "/v1/workflows/setter/instances", map[string]any{"id": long}).want(t, http.StatusBadRequest).problem(t)
	for _, req := range []struct{ method, path string }{
		{"GET", "/v1/instances/" + long},
		{"POST", "/v1/instances/" + long + "/cancel"},
		{"PUT", "/v1/instances/" + long + "/state"},
	} {
		var p apiv1.Problem
		if req.method == "PUT" {
			p = h.request(req.method, req.path, adminSecret, "application/json", []byte(`{"format":1}`)).want(t, http.StatusBadRequest).problem(t)
		} else {
			p = h.do(req.method, req.path, nil).want(t, http.StatusBadRequest).problem(t)
		}
		if len(p.Errors) != 1 || p.Errors[0] != atStart.Errors[0] {
			t.Fatalf("%s of a 257-byte id: errors %+v, want those of a start with it, %+v", req.method, p.Errors, atStart.Errors)
		}
	}
}

// rawPath sends a request as admin with path as it is on the request line:
// net/http refuses to parse a URL with a malformed escape, which is what
// some tests send.
func (h *host) rawPath(method, path string) response {
	h.t.Helper()
	req, err := http.NewRequest(method, h.url+"/", nil)
	if err != nil {
		h.t.Fatal(err)
	}
	req.URL.Opaque = path
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	res, err := h.client.Do(req)
	if err != nil {
		h.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: b}
}
