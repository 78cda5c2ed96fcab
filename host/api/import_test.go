package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// TestImportReplacesOnlyWhenAskedAndCopiesUnderAnotherID: a state
// imported over an existing instance is refused with 409 instance-exists
// naming it, unless ?replace=true; imported under another id it is a copy
// of the instance, which waits for its event like the original, and whose
// history says where it came from.
func TestImportReplacesOnlyWhenAskedAndCopiesUnderAnotherID(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("held", "name: held\nsteps: [{id: review, wait: {event: held.go, key: k1}, output: got}]\noutput: \"${ vars.got.by }\"\n")
	var in instance
	h.do("POST", "/v1/workflows/held/instances", map[string]any{"id": "imp-1"}).want(t, http.StatusCreated).json(t, &in)
	h.awaitStatus("imp-1", "suspended")
	state := h.do("GET", "/v1/instances/imp-1/state", nil).want(t, http.StatusOK).body

	p := h.request("PUT", "/v1/instances/imp-1/state", operatorSecret, "application/json", state).want(t, http.StatusConflict).problem(t)
	if p.Type != "urn:weft:problem:instance-exists" || !strings.Contains(p.Detail, `"imp-1"`) || !strings.Contains(p.Detail, "replace=true") {
		t.Errorf("import over imp-1: %+v, want instance-exists naming it and how to replace it", p)
	}
	h.request("PUT", "/v1/instances/imp-1/state?replace=maybe", operatorSecret, "application/json", state).want(t, http.StatusBadRequest)
	var replaced instance
	h.request("PUT", "/v1/instances/imp-1/state?replace=true", operatorSecret, "application/json", state).want(t, http.StatusOK).json(t, &replaced)
	if replaced.ID != "imp-1" || replaced.Status != "suspended" {
		t.Errorf("replaced: %+v", replaced)
	}

	var copied instance
	h.request("PUT", "/v1/instances/imp-2/state", operatorSecret, "application/json", state).want(t, http.StatusCreated).json(t, &copied)
	if copied.ID != "imp-2" || copied.Status != "suspended" || copied.WaitingOn == nil || len(copied.WaitingOn.Bookmarks) != 1 {
		t.Fatalf("imported as imp-2: %+v, want a suspended copy waiting on its event", copied)
	}
	h.request("PUT", "/v1/instances/imp-2/state", operatorSecret, "application/json", state).want(t, http.StatusConflict)
	var hist pageDoc[struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}]
	h.do("GET", "/v1/instances/imp-2/history", nil).want(t, http.StatusOK).json(t, &hist)
	var from string
	for _, e := range hist.Items {
		if e.Type == "instance_imported" {
			var d struct{ From string }
			if err := json.Unmarshal(e.Data, &d); err != nil {
				t.Fatal(err)
			}
			from = d.From
		}
	}
	if from != "imp-1" {
		t.Errorf("imp-2's instance_imported says it came from %q, want imp-1", from)
	}

	var out struct {
		Resumed []string `json:"resumed"`
	}
	h.do("POST", "/v1/events", map[string]any{"name": "held.go", "key": "k1", "payload": map[string]any{"by": "ops"}}).want(t, http.StatusAccepted).json(t, &out)
	if len(out.Resumed) != 2 {
		t.Errorf("the event resumed %v, want imp-1 and imp-2", out.Resumed)
	}
	for _, id := range []string{"imp-1", "imp-2"} {
		if done := h.awaitStatus(id, "completed"); string(done.Output) != `"ops"` {
			t.Errorf("%s: output %s, want \"ops\"", id, done.Output)
		}
	}
}
