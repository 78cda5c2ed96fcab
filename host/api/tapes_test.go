package api_test

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/testplugins"
	"github.com/weftworks/weft/plugins/tape"
)

// failOnce is a workflow whose one activity fails its only attempt.
const failOnce = `
name: failonce
steps:
  - id: try
    activity: kit.fail
    input: { code: busy, message: not now }
    retry: { max_attempts: 1 }
`

// nullFail is a candidate module with the activity "fail" that returns
// null at once, asking the host nothing.
func nullFail(t *testing.T) []byte {
	const manifest = `{"activities":[{"name":"fail"}]}`
	return testplugins.WAT(t, fmt.Sprintf(`(module
  (import "weft" "result" (func $result (param i32 i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "%s")
  (func (export "weft_abi_version") (result i32) (i32.const 1))
  (func (export "weft_alloc") (param i32) (result i32) (i32.const 8192))
  (func (export "weft_manifest") (result i32) (call $result (i32.const 16) (i32.const %d)) (i32.const 0))
  (data (i32.const 1024) "null")
  (func (export "weft_invoke") (param i32 i32 i32) (result i32)
    (call $result (i32.const 1024) (i32.const 4)) (i32.const 0)))`,
		strings.ReplaceAll(manifest, `"`, `\"`), len(manifest)))
}

// TestTapeRoutes: a failed attempt's tape is listed for a reader, without
// its contents; its contents and its replay are refused to a reader (403)
// and served to an admin: the tape holds the input and the failure, the
// replay against the recorded version is the same failure, a candidate
// that returns null differs in its output; an unknown tape or instance is
// a 404, a missing step a 400, a candidate without the activity a 400.
// Asked for as application/octet-stream, the tape is its stored bytes.
func TestTapeRoutes(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{
		api:  api.Config{Tokens: testTokens()},
		node: node.Config{Engine: engine.Config{Tapes: engine.TapeConfig{Policy: weft.DefaultRecordPolicy}}},
	})
	h.pushKit()
	h.putWorkflow("failonce", failOnce)
	var in instance
	h.request("POST", "/v1/workflows/failonce/instances", adminSecret, "application/json", []byte(`{}`)).want(t, http.StatusCreated).json(t, &in)
	h.awaitStatus(in.ID, "failed")

	var list apiv1.Page[apiv1.TapeSummary]
	h.request("GET", "/v1/instances/"+in.ID+"/tapes", readerSecret, "", nil).want(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 1 {
		t.Fatalf("tapes: %+v, want one", list)
	}
	sum := list.Items[0]
	if sum.Key.InstanceID != in.ID || sum.Key.Attempt != 1 || sum.Outcome != "failed" || sum.FailureCode != "busy" ||
		sum.Plugin != "kit" || sum.Activity != "fail" || sum.Size == 0 || sum.Key.StepPath == "" || sum.Key.Exec == "" {
		t.Fatalf("tape summary %+v", sum)
	}

	q := "?step=" + url.QueryEscape(sum.Key.StepPath)
	tapePath := "/v1/instances/" + in.ID + "/tapes/1"
	h.request("GET", tapePath+q, readerSecret, "", nil).want(t, http.StatusForbidden)
	h.request("POST", tapePath+"/replay"+q, readerSecret, "", nil).want(t, http.StatusForbidden)
	h.request("POST", tapePath+"/replay"+q, operatorSecret, "", nil).want(t, http.StatusForbidden)

	var tp apiv1.Tape
	h.request("GET", tapePath+q+"&exec="+url.QueryEscape(sum.Key.Exec), adminSecret, "", nil).want(t, http.StatusOK).json(t, &tp)
	if tp.Key != sum.Key || tp.Failure == nil || tp.Failure.Code != "busy" || tp.Failure.Message != "not now" ||
		!strings.Contains(string(tp.Input), `"busy"`) || string(tp.Output) != "null" || len(tp.Entries) == 0 || tp.Entries[0].Kind == "" {
		t.Fatalf("tape %+v", tp)
	}

	// Its stored bytes, asked for as application/octet-stream, are the
	// envelope.
	req, err := http.NewRequest("GET", h.url+tapePath+q, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+adminSecret)
	req.Header.Set("Accept", "application/octet-stream")
	resp, err := h.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("the tape's bytes: %d %s, %v", resp.StatusCode, resp.Header.Get("Content-Type"), err)
	}
	if a, err := tape.UnmarshalAttempt(raw); err != nil || a.FailureCode != "busy" || a.Activity != "fail" {
		t.Errorf("the tape's bytes decode to %+v, %v", a, err)
	}

	var r apiv1.ReplayReport
	h.request("POST", tapePath+"/replay"+q, adminSecret, "", nil).want(t, http.StatusOK).json(t, &r)
	if r.Outcome != string(weft.ReplaySame) || r.Failure == nil || r.Failure.Code != "busy" || r.RecordedFailure == nil ||
		r.ReplayedVersion != r.RecordedVersion || r.RecordedVersion != sum.PluginVersion || r.Key != sum.Key {
		t.Errorf("replay against the recorded version: %+v", r)
	}
	r = apiv1.ReplayReport{}
	h.request("POST", tapePath+"/replay"+q, adminSecret, "application/wasm", nullFail(t)).want(t, http.StatusOK).json(t, &r)
	if r.Outcome != string(weft.ReplayDifferentOutput) || string(r.Output) != "null" || r.ReplayedVersion == r.RecordedVersion {
		t.Errorf("replay against a candidate: %+v", r)
	}

	// A candidate without the activity, an unknown tape, a missing step.
	p := h.request("POST", tapePath+"/replay"+q, adminSecret, "application/wasm", testplugins.Bytes(t, "text")).want(t, http.StatusBadRequest).problem(t)
	if !strings.Contains(p.Detail, `"fail"`) {
		t.Errorf("candidate without the activity: %s", p.Detail)
	}
	h.request("GET", "/v1/instances/"+in.ID+"/tapes/2"+q, adminSecret, "", nil).want(t, http.StatusNotFound).problem(t)
	h.request("GET", tapePath+q+"&exec=e999", adminSecret, "", nil).want(t, http.StatusNotFound).problem(t)
	h.request("POST", tapePath+"/replay?step=nope", adminSecret, "", nil).want(t, http.StatusNotFound).problem(t)
	h.request("GET", "/v1/instances/nobody/tapes", readerSecret, "", nil).want(t, http.StatusNotFound).problem(t)
	h.request("GET", tapePath, adminSecret, "", nil).want(t, http.StatusBadRequest).problem(t)
	h.request("GET", "/v1/instances/"+in.ID+"/tapes/zero"+q, adminSecret, "", nil).want(t, http.StatusBadRequest).problem(t)
}
