package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/testplugins"
)

// shoutFlow records every attempt of its one activity, kit.upper.
const shoutFlow = `
name: shout
record: all
steps:
  - { id: up, activity: kit.upper, input: { text: "${ input.name }" }, output: up }
output: "${ vars.up.text }"
`

// runShout runs the shout workflow for each name, to completion: each
// run records its attempt's tape before it completes.
func runShout(t *testing.T, h *host, names ...string) {
	t.Helper()
	for _, name := range names {
		var in instance
		h.do("POST", "/v1/workflows/shout/instances?wait=60s", map[string]any{"input": map[string]any{"name": name}}).want(t, http.StatusCreated).json(t, &in)
		if in.Status != "completed" {
			t.Fatalf("shout %s: %s, %s", name, in.Status, in.Error)
		}
	}
}

// TestShadowRoute: a shadow run of the recorded version over the
// plugin's recorded attempts finds every one the same, at the same
// speed, newest first; a candidate whose activity answers another
// document differs in its output, with the JSON Patch between them, and
// is faster (it does next to nothing); ?last=, ?workflow= and ?since=
// select the attempts. An unknown plugin is a 404, a reader's or an
// operator's token a 403, a bad ?since= or ?last= a 400 naming it, an
// empty body a 400, a module that does not load a 422.
func TestShadowRoute(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("shout", shoutFlow)
	runShout(t, h, "ada", "grace")
	kit := testplugins.Bytes(t, "kit")
	shadow := func(query, token string, body []byte) response {
		t.Helper()
		return h.request("POST", "/v1/plugins/kit/shadow"+query, token, "application/wasm", body)
	}

	var same apiv1.ShadowReport
	shadow("", adminSecret, kit).want(t, http.StatusOK).json(t, &same)
	if same.Plugin != "kit" || len(same.CandidateVersion) != 64 || same.Query.Plugin != "kit" || same.Query.Limit != weft.DefaultShadowAttempts ||
		len(same.Attempts) != 2 || same.Summary.Attempts != 2 || same.Summary.Outcomes["same"] != 2 || same.Summary.Alike != 2 ||
		same.Summary.Fuel == 0 || same.Summary.BaselineFuel == 0 {
		t.Fatalf("shadow run of the recorded version: %+v", same)
	}
	for _, a := range same.Attempts {
		if a.Outcome != "same" || a.Baseline != "same" || a.Speed != "alike" || a.Activity != "upper" || a.Workflow != "shout" ||
			a.RecordedVersion != same.CandidateVersion || a.Fuel == 0 || a.BaselineFuel == 0 || a.Diff != nil || a.Error != "" {
			t.Errorf("attempt %+v", a)
		}
	}
	if a, b := same.Attempts[0], same.Attempts[1]; a.RecordedAt.Before(b.RecordedAt) || a.Key.InstanceID == b.Key.InstanceID {
		t.Errorf("attempts not newest first, or of one instance: %+v, %+v", a.Key, b.Key)
	}

	var diff apiv1.ShadowReport
	shadow("?last=1", adminSecret, testplugins.Constant(t, "upper", `{"text":"NOPE"}`)).want(t, http.StatusOK).json(t, &diff)
	if len(diff.Attempts) != 1 || diff.Query.Limit != 1 || diff.Summary.Outcomes["different_output"] != 1 || diff.CandidateVersion == same.CandidateVersion {
		t.Fatalf("shadow run of another module: %+v", diff)
	}
	a := diff.Attempts[0]
	if a.Key != same.Attempts[0].Key || a.Outcome != "different_output" || a.Baseline != "same" || string(a.Output) != `{"text":"NOPE"}` ||
		string(a.RecordedOutput) != `{"text":"GRACE"}` || a.Speed != "faster" || a.Fuel >= a.BaselineFuel {
		t.Errorf("attempt %+v", a)
	}
	var ops []struct {
		Op, Path string
		Value    any
	}
	if err := json.Unmarshal(a.Diff, &ops); err != nil || len(ops) != 1 || ops[0].Op != "replace" || ops[0].Path != "/text" || ops[0].Value != "NOPE" {
		t.Errorf("diff %s: %+v, %v", a.Diff, ops, err)
	}

	// The selection: another workflow's attempts, or those of the
	// future, are none; the answer's lists are still lists.
	for _, q := range []string{"?workflow=other", "?since=" + url.QueryEscape(time.Now().Add(time.Hour).Format(time.RFC3339))} {
		r := shadow(q, adminSecret, kit).want(t, http.StatusOK)
		var none apiv1.ShadowReport
		r.json(t, &none)
		if none.Summary.Attempts != 0 || !strings.Contains(string(r.body), `"attempts":[]`) || !strings.Contains(string(r.body), `"outcomes":{}`) {
			t.Errorf("shadow run%s: %s", q, r.body)
		}
	}
	var shout apiv1.ShadowReport
	shadow("?workflow=shout&since="+url.QueryEscape(time.Now().Add(-time.Hour).Format(time.RFC3339)), adminSecret, kit).want(t, http.StatusOK).json(t, &shout)
	if shout.Summary.Attempts != 2 || shout.Query.Workflow != "shout" || shout.Query.Since.IsZero() {
		t.Errorf("shadow run of workflow shout since an hour ago: %+v", shout)
	}

	h.request("POST", "/v1/plugins/nobody/shadow", adminSecret, "application/wasm", kit).want(t, http.StatusNotFound).problem(t)
	// Refused from the headers, before the body is read: a small one,
	// which the client has sent whole by then.
	shadow("", readerSecret, []byte("x")).want(t, http.StatusForbidden).problem(t)
	shadow("", operatorSecret, []byte("x")).want(t, http.StatusForbidden).problem(t)
	for q, field := range map[string]string{"?since=yesterday": "since", "?last=0": "last", "?last=1001": "last"} {
		p := shadow(q, adminSecret, kit).want(t, http.StatusBadRequest).problem(t)
		if len(p.Errors) != 1 || p.Errors[0].Path != field {
			t.Errorf("shadow run%s: %+v", q, p)
		}
	}
	if p := shadow("", adminSecret, nil).want(t, http.StatusBadRequest).problem(t); !strings.Contains(p.Detail, "the candidate module is required") {
		t.Errorf("empty body: %s", p.Detail)
	}
	shadow("", adminSecret, []byte("not a module")).want(t, http.StatusUnprocessableEntity).problem(t)
}

// loopFlow has an activity step at the top and one in each of two
// iterations of a foreach, recorded under the host's policy (tapes.policy
// all in the test's host).
const loopFlow = `
name: loop
steps:
  - { id: first, activity: kit.upper, input: { text: a } }
  - id: each
    foreach: "${ [1, 2] }"
    as: n
    do:
      - { id: inner, activity: kit.echo, input: "${ n }" }
`

// TestTapeStepByID: ?step= takes a step's id as well as its path. An id
// names the one path its tapes are at; a step in a foreach, whose
// iterations each have a path, is ambiguous (409 listing the paths)
// unless ?exec= picks an iteration's; an id the definition does not have,
// or a step without tapes, is a 404.
func TestTapeStepByID(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{
		api:  api.Config{Tokens: testTokens()},
		node: node.Config{Engine: engine.Config{Tapes: engine.TapeConfig{Policy: weft.RecordPolicy{Mode: weft.RecordAll}}}},
	})
	h.pushKit()
	h.putWorkflow("loop", loopFlow)
	var in instance
	h.do("POST", "/v1/workflows/loop/instances?wait=60s", nil).want(t, http.StatusCreated).json(t, &in)
	if in.Status != "completed" {
		t.Fatalf("loop: %s, %s", in.Status, in.Error)
	}
	var list apiv1.Page[apiv1.TapeSummary]
	h.request("GET", "/v1/instances/"+in.ID+"/tapes", readerSecret, "", nil).want(t, http.StatusOK).json(t, &list)
	var inner []apiv1.TapeKey
	for _, s := range list.Items {
		if s.Activity == "echo" {
			inner = append(inner, s.Key)
		}
	}
	if len(list.Items) != 3 || len(inner) != 2 || inner[0].StepPath == inner[1].StepPath {
		t.Fatalf("tapes %+v", list.Items)
	}
	tape := "/v1/instances/" + in.ID + "/tapes/1"

	var tp apiv1.Tape
	h.request("GET", tape+"?step=first", adminSecret, "", nil).want(t, http.StatusOK).json(t, &tp)
	if tp.Key.StepPath != "steps[0]" || tp.Activity != "upper" {
		t.Errorf("tape of step first: %+v", tp.TapeSummary)
	}
	var r apiv1.ReplayReport
	h.request("POST", tape+"/replay?step=first", adminSecret, "", nil).want(t, http.StatusOK).json(t, &r)
	if r.Outcome != "same" || r.Key.StepPath != "steps[0]" {
		t.Errorf("replay of step first: %+v", r)
	}

	p := h.request("GET", tape+"?step=inner", adminSecret, "", nil).want(t, http.StatusConflict).problem(t)
	if !strings.Contains(p.Detail, inner[0].StepPath) || !strings.Contains(p.Detail, inner[1].StepPath) {
		t.Errorf("ambiguous step id: %s", p.Detail)
	}
	tp = apiv1.Tape{}
	h.request("GET", tape+"?step=inner&exec="+url.QueryEscape(inner[1].Exec), adminSecret, "", nil).want(t, http.StatusOK).json(t, &tp)
	if tp.Key != inner[1] {
		t.Errorf("tape of step inner, exec %s: %+v, want %+v", inner[1].Exec, tp.Key, inner[1])
	}
	for _, step := range []string{"nope", "each"} {
		if p := h.request("GET", tape+"?step="+step, adminSecret, "", nil).want(t, http.StatusNotFound).problem(t); !strings.Contains(p.Detail, step) {
			t.Errorf("step %s: %s", step, p.Detail)
		}
	}
	h.request("GET", "/v1/instances/"+in.ID+"/tapes/2?step=first", adminSecret, "", nil).want(t, http.StatusNotFound).problem(t)
}
