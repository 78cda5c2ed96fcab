package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// Pause and resume of a whole workflow (docs/operations.md, "Pause a
// workflow"; docs/http-api.md, "Workflows").

// heldDoc is an instance document with its hold.
type heldDoc struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Hold   *struct {
		Since time.Time `json:"since"`
	} `json:"hold"`
}

// operate sends a request with the operator's token and a JSON body (none
// when body is nil).
func (h *host) operate(method, path string, body any) response {
	h.t.Helper()
	if body == nil {
		return h.request(method, path, operatorSecret, "", nil)
	}
	b, err := json.Marshal(body)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.request(method, path, operatorSecret, "application/json", b)
}

// workflowPaused reads a workflow's paused as GET /v1/workflows/{name}
// shows it.
func (h *host) workflowPaused(name string) *apiv1.WorkflowPause {
	h.t.Helper()
	var w apiv1.Workflow
	h.do("GET", "/v1/workflows/"+name, nil).want(h.t, http.StatusOK).json(h.t, &w)
	return w.Paused
}

// TestPauseAndResumeAWorkflow: an operator pauses a workflow (a reader
// may not); the pause shows on the workflow, in the workflows list and in
// the list of pauses, and a second pause keeps the first. Starts are then
// accepted and held: pending with their hold, in lists too, counted on
// the workflow, each with start_held by the pauser; one is cancelled. The
// resume answers the pause and its release batch, which releases the
// others oldest first: each records start_released and completes. A
// resume of a workflow that is not paused is a 404.
func TestPauseAndResumeAWorkflow(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("greet", echoFlow)

	h.request("POST", "/v1/workflows/greet/pause", readerSecret, "", nil).want(t, http.StatusForbidden)
	h.operate("POST", "/v1/workflows/greet/pause", map[string]any{"reason": "x", "extra": 1}).want(t, http.StatusBadRequest)
	var p apiv1.WorkflowPause
	h.operate("POST", "/v1/workflows/greet/pause", map[string]any{"reason": "bad plugin release"}).want(t, http.StatusOK).json(t, &p)
	if p.Workflow != "greet" || p.Actor != "ops" || p.Reason != "bad plugin release" || p.Since.IsZero() || p.Held != nil {
		t.Fatalf("the pause answered %+v, want ops's, with its reason and since", p)
	}
	var again apiv1.WorkflowPause
	h.do("POST", "/v1/workflows/greet/pause", map[string]any{"reason": "another"}).want(t, http.StatusOK).json(t, &again)
	if again.Actor != "ops" || again.Reason != "bad plugin release" || !again.Since.Equal(p.Since) {
		t.Errorf("a second pause answered %+v, want the first %+v", again, p)
	}
	if w := h.workflowPaused("greet"); w == nil || w.Actor != "ops" || w.Held == nil || *w.Held != 0 || w.HeldMore {
		t.Errorf("the paused workflow shows %+v, want its pause holding 0", w)
	}
	var list apiv1.Page[apiv1.Workflow]
	h.request("GET", "/v1/workflows", readerSecret, "", nil).want(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 1 || list.Items[0].Paused == nil || list.Items[0].Paused.Reason != "bad plugin release" || list.Items[0].Paused.Held != nil {
		t.Errorf("the workflows list shows %+v, want greet paused, uncounted", list.Items)
	}

	// Starts are accepted and held.
	var ids []string
	for i := range 3 {
		var in heldDoc
		h.operate("POST", "/v1/workflows/greet/instances", map[string]any{"id": fmt.Sprint("g-", i), "input": map[string]any{"name": fmt.Sprint("n", i)}}).
			want(t, http.StatusCreated).json(t, &in)
		if in.Status != "pending" || in.Hold == nil || in.Hold.Since.IsZero() {
			t.Fatalf("a start of the paused workflow answered %+v, want it pending and held", in)
		}
		ids = append(ids, in.ID)
	}
	var held apiv1.Page[heldDoc]
	h.do("GET", "/v1/instances?workflow=greet", nil).want(t, http.StatusOK).json(t, &held)
	for _, in := range held.Items {
		if in.Status != "pending" || in.Hold == nil {
			t.Errorf("the list shows %+v, want every start pending and held", in)
		}
	}
	if w := h.workflowPaused("greet"); w == nil || w.Held == nil || *w.Held != 3 {
		t.Errorf("the paused workflow shows %+v, want 3 held", w)
	}
	evs := h.historyOf(ids[0])
	if len(evs) < 2 || evs[1].Type != "start_held" || evs[1].Actor != "ops" || evs[1].Data["reason"] != "bad plugin release" {
		t.Errorf("a held start's history: %+v, want start_held by ops with the pause's reason", evs)
	}
	h.operate("POST", "/v1/instances/"+ids[2]+"/cancel", map[string]any{"reason": "not wanted"}).want(t, http.StatusAccepted)
	h.awaitStatus(ids[2], "cancelled")

	h.request("POST", "/v1/workflows/greet/resume", readerSecret, "", nil).want(t, http.StatusForbidden)
	h.operate("POST", "/v1/workflows/greet/resume", map[string]any{"rate": "fast"}).want(t, http.StatusBadRequest)
	var res apiv1.WorkflowResume
	h.operate("POST", "/v1/workflows/greet/resume", map[string]any{"reason": "fixed", "rate": 0}).want(t, http.StatusOK).json(t, &res)
	if res.Pause.Workflow != "greet" || res.Pause.Reason != "bad plugin release" || res.Release == nil {
		t.Errorf("the resume answered the pause %+v and release %v, want the one removed and its release", res.Pause, res.Release)
	}
	r := res.Release
	if r == nil || r.Op != apiv1.BatchRelease || r.Actor != "ops" || r.Reason != "fixed" || r.Rate != 0 || !strings.Contains(r.Query, `workflow = "greet"`) {
		t.Fatalf("the resume's release batch is %+v, want a release by ops, for the reason given, unlimited", r)
	}
	b := h.awaitBatch(r.ID, "done", func(b apiv1.Batch) bool { return b.Phase.Finished() })
	if b.Phase != apiv1.PhaseDone || b.Matched != 2 || b.Counts[apiv1.ItemDone] != 2 {
		t.Errorf("the release ended %s with %d matched, counts %v; want 2 released", b.Phase, b.Matched, b.Counts)
	}
	var items apiv1.Page[apiv1.BatchItem]
	h.do("GET", "/v1/batches/"+r.ID+"/items", nil).want(t, http.StatusOK).json(t, &items)
	if len(items.Items) != 2 || items.Items[0].InstanceID != ids[0] || items.Items[1].InstanceID != ids[1] {
		t.Errorf("the release's items are %+v, want %v oldest first", items.Items, ids[:2])
	}
	for i, id := range ids[:2] {
		var in heldDoc
		h.AwaitStatus(t, id, "completed", &in)
		if in.Hold != nil || string(in.Output) != fmt.Sprintf(`"N%d"`, i) {
			t.Errorf("released %s: %+v, want it completed without its hold", id, in)
		}
		evs := h.historyOf(id)
		if got := typesOf(evs); len(got) < 3 || got[2] != "start_released" {
			t.Errorf("released %s's history: %v, want start_released after start_held", id, got)
		} else if _, ok := evs[2].Data["held_ms"]; !ok {
			t.Errorf("start_released has %v, want held_ms", evs[2].Data)
		}
	}
	if w := h.workflowPaused("greet"); w != nil {
		t.Errorf("the resumed workflow shows %+v, want no pause", w)
	}
	if pr := h.operate("POST", "/v1/workflows/greet/resume", nil).want(t, http.StatusNotFound).problem(t); pr.Detail != `workflow "greet" is not paused` {
		t.Errorf("a resume of a workflow not paused: %q", pr.Detail)
	}
	// Started again, a start runs at once.
	var in heldDoc
	h.operate("POST", "/v1/workflows/greet/instances?wait=30s", map[string]any{"input": map[string]any{"name": "z"}}).want(t, http.StatusCreated).json(t, &in)
	if in.Status != "completed" || in.Hold != nil {
		t.Errorf("a start after the resume: %+v, want it completed", in)
	}
}

// TestPauseAWorkflowNotSaved: a workflow may be paused before it is
// saved; the list of pauses has it (the workflows list cannot), and its
// resume releases nothing, through a batch that matched none. A name no
// definition can have, a reason longer than a batch's and a negative rate
// are 400s, and a refused resume leaves the workflow paused.
func TestPauseAWorkflowNotSaved(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.operate("POST", "/v1/workflows/Not%20A%20Name/pause", nil).want(t, http.StatusBadRequest)
	h.operate("POST", "/v1/workflows/later/pause", map[string]any{"reason": strings.Repeat("x", 1025)}).want(t, http.StatusBadRequest)
	h.operate("POST", "/v1/workflows/later/pause", nil).want(t, http.StatusOK)
	h.do("GET", "/v1/workflows/later", nil).want(t, http.StatusNotFound)
	var pauses apiv1.Page[apiv1.WorkflowPause]
	h.request("GET", "/v1/workflow-pauses", readerSecret, "", nil).want(t, http.StatusOK).json(t, &pauses)
	if len(pauses.Items) != 1 || pauses.Items[0].Workflow != "later" || pauses.Items[0].Reason != "paused through the API" || pauses.NextCursor != "" {
		t.Errorf("the pauses are %+v, want later's, with the default reason", pauses)
	}

	h.operate("POST", "/v1/workflows/later/resume", map[string]any{"rate": -1}).want(t, http.StatusBadRequest)
	h.operate("POST", "/v1/workflows/later/resume", map[string]any{"reason": strings.Repeat("x", 1025)}).want(t, http.StatusBadRequest)
	h.request("GET", "/v1/workflow-pauses", readerSecret, "", nil).want(t, http.StatusOK).json(t, &pauses)
	if len(pauses.Items) != 1 {
		t.Fatalf("after refused resumes the pauses are %+v, want later's still", pauses.Items)
	}
	var res apiv1.WorkflowResume
	h.operate("POST", "/v1/workflows/later/resume", nil).want(t, http.StatusOK).json(t, &res)
	if res.Release == nil || res.Release.Rate != 1000 || res.Release.Reason != "resumed through the API" {
		t.Fatalf("the resume answered %+v, want a release batch at the default rate", res)
	}
	if b := h.awaitBatch(res.Release.ID, "done", func(b apiv1.Batch) bool { return b.Phase.Finished() }); b.Phase != apiv1.PhaseDone || b.Matched != 0 {
		t.Errorf("the release of nothing ended %s with %d matched", b.Phase, b.Matched)
	}
	h.request("GET", "/v1/workflow-pauses", readerSecret, "", nil).want(t, http.StatusOK).json(t, &pauses)
	if len(pauses.Items) != 0 {
		t.Errorf("after the resume the pauses are %+v, want none", pauses.Items)
	}
}
