package api_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/weftworks/weft/internal/testplugins"
)

// deliverFlow delivers its input with the webhook plugin, once: without
// grants the plugin can reach nothing, and the instance fails.
const deliverFlow = `
name: deliver
steps:
  - { id: send, activity: webhook.deliver, input: "${ input }", output: sent, retry: { max_attempts: 1 } }
output: "${ vars.sent.status }"
`

// TestRetryContinuesAFailedInstance: an instance that failed because its
// plugin was not granted what it needs is retried once an operator has
// granted it, and completes; the step that failed runs again from attempt
// 1, the history says so, and the receiver sees one delivery. A retry of
// an instance that has not failed is a 409; of none, a 404; from a reader,
// a 403.
func TestRetryContinuesAFailedInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.request("PUT", "/v1/plugins/webhook", adminSecret, "application/wasm", testplugins.Bytes(t, "webhook")).want(t, http.StatusCreated)
	h.putWorkflow("deliver", deliverFlow)

	var mu sync.Mutex
	var got []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got = append(got, r.Header.Get("Idempotency-Key")+" "+string(b))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"ok":true}`)
	}))
	t.Cleanup(hook.Close)

	var in instance
	h.do("POST", "/v1/workflows/deliver/instances?wait=60s", map[string]any{"id": "d-1", "input": map[string]any{"n": 1}}).
		want(t, http.StatusCreated).json(t, &in)
	if in.Status != "failed" {
		t.Fatalf("without grants the instance is %s, want failed: %s", in.Status, in.Error)
	}

	// A reader may not retry; nor may anyone retry what has not failed.
	h.request("POST", "/v1/instances/d-1/retry", readerSecret, "", nil).want(t, http.StatusForbidden)
	h.do("POST", "/v1/instances/nobody/retry", nil).want(t, http.StatusNotFound)

	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte("s3cret-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	grants := fmt.Sprintf(`{"hosts": [{"pattern": %q, "private_networks": true}], "config": {"url": %q}, "secrets": {"token": %q}}`,
		hook.URL, hook.URL+"/in", "file:"+tokenFile)
	h.request("PUT", "/v1/plugins/webhook/grants", adminSecret, "application/json", []byte(grants)).want(t, http.StatusOK)

	h.request("POST", "/v1/instances/d-1/retry", operatorSecret, "application/json", []byte(`{"reason": "granted the hook"}`)).
		want(t, http.StatusAccepted)
	// Until the retry has run, the instance is still failed: a wait would
	// answer at once.
	in = h.awaitStatus("d-1", "completed")
	if in.Status != "completed" || string(in.Output) != "200" || string(in.Error) != "null" {
		t.Fatalf("after the retry: status %s, output %s, error %s; want completed, 200, null", in.Status, in.Output, in.Error)
	}
	mu.Lock()
	if len(got) != 1 || !strings.HasSuffix(got[0], ` {"n":1}`) {
		t.Errorf("the hook received %q, want one delivery of {\"n\":1}", got)
	}
	mu.Unlock()

	var hist pageDoc[struct {
		Type     string          `json:"type"`
		StepPath string          `json:"step_path"`
		Attempt  int             `json:"attempt"`
		Data     json.RawMessage `json:"data"`
	}]
	h.do("GET", "/v1/instances/d-1/history?limit=1000", nil).want(t, http.StatusOK).json(t, &hist)
	var types []string
	var retried json.RawMessage
	for _, e := range hist.Items {
		types = append(types, e.Type)
		if e.Type == "activity_scheduled" && e.Attempt != 1 {
			t.Errorf("attempt %d scheduled, want every attempt numbered 1 (a fresh count after the retry)", e.Attempt)
		}
		if e.Type == "instance_retried" {
			retried = e.Data
		}
	}
	i := slices.Index(types, "instance_failed")
	j := slices.Index(types, "instance_retried")
	k := slices.Index(types, "instance_completed")
	if i < 0 || j < i || k < j || strings.Count(strings.Join(types, " "), "activity_scheduled") != 2 {
		t.Fatalf("history %v: want instance_failed, instance_retried, then instance_completed, and two attempts", types)
	}
	var rd struct{ Reason, Code, Step string }
	if err := json.Unmarshal(retried, &rd); err != nil || rd.Reason != "granted the hook" || rd.Step != "steps[0]" || rd.Code == "" {
		t.Errorf("instance_retried data %s: want the reason, the failure's code and step", retried)
	}

	// Completed now: a retry is refused.
	p := h.do("POST", "/v1/instances/d-1/retry", nil).want(t, http.StatusConflict).problem(t)
	if !strings.Contains(p.Detail, "only a failed instance") {
		t.Errorf("detail %q", p.Detail)
	}

	// Failed after its last step (its output expression fails): run
	// again, it would fail the same way.
	h.request("PUT", "/v1/workflows/sum", adminSecret, "application/yaml", []byte("name: sum\nsteps:\n  - { id: s, set: { n: \"${ input }\" } }\noutput: \"${ vars.n + 1 }\"\n")).want(t, http.StatusCreated)
	h.request("POST", "/v1/workflows/sum/instances?wait=60s", adminSecret, "application/json", []byte(`{"id": "d-2", "input": "one"}`)).want(t, http.StatusCreated)
	h.awaitStatus("d-2", "failed")
	if p := h.do("POST", "/v1/instances/d-2/retry", nil).want(t, http.StatusConflict).problem(t); !strings.Contains(p.Detail, "after its last") {
		t.Errorf("retry of an instance whose output failed: %q", p.Detail)
	}

	// Its workflow deleted since it failed: nothing could run it.
	h.request("DELETE", "/v1/plugins/webhook/grants", adminSecret, "", nil).want(t, http.StatusNoContent)
	h.do("POST", "/v1/workflows/deliver/instances?wait=60s", map[string]any{"id": "d-3", "input": 1}).want(t, http.StatusCreated)
	h.awaitStatus("d-3", "failed")
	h.do("DELETE", "/v1/workflows/deliver", nil).want(t, http.StatusNoContent)
	if p := h.do("POST", "/v1/instances/d-3/retry", nil).want(t, http.StatusConflict).problem(t); !strings.Contains(p.Detail, "was deleted") {
		t.Errorf("retry of an instance whose workflow was deleted: %q", p.Detail)
	}
}

// TestBulkCancel: POST /v1/instances/cancel cancels the instances it names
// that have not finished and says, per id, what became of it; a bad list
// is a 400, a reader a 403.
func TestBulkCancel(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("hold", holdFlow)
	for _, id := range []string{"b-1", "b-2", "b-3"} {
		h.do("POST", "/v1/workflows/hold/instances?wait=30s&until=suspended", map[string]any{"id": id}).want(t, http.StatusCreated)
	}
	h.do("POST", "/v1/instances/b-3/cancel", nil).want(t, http.StatusAccepted)
	h.awaitStatus("b-3", "cancelled")

	body := map[string]any{"ids": []string{"b-1", "b-2", "b-3", "nobody"}, "reason": "clearing the queue"}
	h.request("POST", "/v1/instances/cancel", readerSecret, "application/json", mustJSON(t, body)).want(t, http.StatusForbidden)
	var out pageDoc[struct{ ID, Outcome, Detail string }]
	h.request("POST", "/v1/instances/cancel", operatorSecret, "application/json", mustJSON(t, body)).want(t, http.StatusOK).json(t, &out)
	want := map[string]string{"b-1": "cancelled", "b-2": "cancelled", "b-3": "finished", "nobody": "not_found"}
	if len(out.Items) != len(want) {
		t.Fatalf("items %+v, want one per id", out.Items)
	}
	for _, it := range out.Items {
		if want[it.ID] != it.Outcome {
			t.Errorf("%s: outcome %q (%s), want %q", it.ID, it.Outcome, it.Detail, want[it.ID])
		}
	}
	for _, id := range []string{"b-1", "b-2"} {
		in := h.awaitStatus(id, "cancelled")
		if !strings.Contains(string(in.Error), "clearing the queue") {
			t.Errorf("%s: error %s, want the reason", id, in.Error)
		}
	}

	many := make([]string, 1001)
	for i := range many {
		many[i] = fmt.Sprintf("x-%d", i)
	}
	for _, bad := range []map[string]any{{"ids": []string{}}, {"ids": many}, {"ids": []string{"ok", ""}}} {
		h.do("POST", "/v1/instances/cancel", bad).want(t, http.StatusBadRequest)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
