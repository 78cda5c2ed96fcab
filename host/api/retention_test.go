package api_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
)

// TestInstanceDeleteAfter: a finished instance shows when it will be
// deleted (its finish plus the retention); one kept forever, and one still
// running, show none; a state that sets it on a live instance is refused,
// naming the field.
func TestInstanceDeleteAfter(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}, retention: time.Hour})
	h.putWorkflow("quick", "name: quick\nsteps: [{id: a, set: {x: 1}}]\n")
	h.putWorkflow("kept", "name: kept\nretention: 0\nsteps: [{id: a, set: {x: 1}}]\n")
	h.putWorkflow("waits", "name: waits\nsteps: [{id: w, wait: {event: go, key: k}}]\n")

	type shown struct {
		Status      string     `json:"status"`
		UpdatedAt   time.Time  `json:"updated_at"`
		DeleteAfter *time.Time `json:"delete_after"`
	}
	var quick shown
	h.do("POST", "/v1/workflows/quick/instances?wait=30s", map[string]any{"id": "quick-1"}).want(t, http.StatusCreated).json(t, &quick)
	if quick.Status != "completed" || quick.DeleteAfter == nil {
		t.Fatalf("finished instance = %+v, want it completed with a delete_after", quick)
	}
	// Stamped by the engine just before the store's commit time.
	if d := quick.UpdatedAt.Sub(quick.DeleteAfter.Add(-time.Hour)); d < 0 || d > 10*time.Second {
		t.Errorf("delete_after %s, want about updated_at %s plus 1h", quick.DeleteAfter, quick.UpdatedAt)
	}
	var listed pageDoc[shown]
	h.do("GET", "/v1/instances?workflow=quick", nil).want(t, http.StatusOK).json(t, &listed)
	if len(listed.Items) != 1 || listed.Items[0].DeleteAfter == nil || !listed.Items[0].DeleteAfter.Equal(*quick.DeleteAfter) {
		t.Errorf("listed = %+v, want it with its delete_after", listed.Items)
	}

	var kept shown
	h.do("POST", "/v1/workflows/kept/instances?wait=30s", nil).want(t, http.StatusCreated).json(t, &kept)
	if kept.Status != "completed" || kept.DeleteAfter != nil {
		t.Errorf("instance of a workflow with retention 0 = %+v, want no delete_after", kept)
	}
	var waits shown
	h.do("POST", "/v1/workflows/waits/instances?wait=30s&until=suspended", map[string]any{"id": "waits-1"}).want(t, http.StatusCreated).json(t, &waits)
	if waits.Status != "suspended" || waits.DeleteAfter != nil {
		t.Errorf("suspended instance = %+v, want no delete_after", waits)
	}

	// A state with delete_after on a suspended instance.
	r := h.do("GET", "/v1/instances/waits-1/state", nil).want(t, http.StatusOK)
	var state map[string]any
	r.json(t, &state)
	state["instance"].(map[string]any)["delete_after"] = time.Now().UTC().Format(time.RFC3339)
	p := h.do("PUT", "/v1/instances/waits-1/state", state).want(t, http.StatusUnprocessableEntity).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Path != "instance.delete_after" {
		t.Errorf("problem = %+v, want one at instance.delete_after", p)
	}
}
