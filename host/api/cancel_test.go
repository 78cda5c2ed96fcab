package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
)

// holdFlow waits for an event and runs no plugin.
const holdFlow = `
name: hold
steps:
  - { id: review, wait: { event: hold.released, key: fixed } }
`

// TestCancelledInstanceSaysWhy: a cancelled instance's error is
// {"code": "cancelled", "message": <the reason>}, with the reason given to
// the cancel request or the default one, in the show, the list and the
// answer of a wait; as a failed instance's error says why it failed.
func TestCancelledInstanceSaysWhy(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("hold", holdFlow)

	for _, tt := range []struct {
		id   string
		body any
		want string
	}{
		{"with-reason", map[string]any{"reason": "customer left"}, "customer left"},
		{"without-reason", nil, "cancelled through the API"},
	} {
		h.do("POST", "/v1/workflows/hold/instances?wait=30s&until=suspended", map[string]any{"id": tt.id}).want(t, http.StatusCreated)
		h.do("POST", "/v1/instances/"+tt.id+"/cancel", tt.body).want(t, http.StatusAccepted)
		var waited instance
		h.do("GET", "/v1/instances/"+tt.id+"?wait=30s", nil).want(t, http.StatusOK).json(t, &waited)
		if waited.Status != "cancelled" {
			t.Fatalf("instance %s is %s after the wait, want cancelled", tt.id, waited.Status)
		}
		var e struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		}
		if err := json.Unmarshal(waited.Error, &e); err != nil || e.Code != "cancelled" || e.Message != tt.want {
			t.Fatalf("instance %s: error %s (%v), want code cancelled and message %q", tt.id, waited.Error, err, tt.want)
		}
		var list pageDoc[instance]
		h.do("GET", "/v1/instances?status=cancelled&workflow=hold", nil).want(t, http.StatusOK).json(t, &list)
		found := false
		for _, in := range list.Items {
			if in.ID == tt.id {
				found = true
				if string(in.Error) != string(waited.Error) {
					t.Fatalf("instance %s: listed error %s, shown %s", tt.id, in.Error, waited.Error)
				}
			}
		}
		if !found {
			t.Fatalf("instance %s not listed as cancelled: %+v", tt.id, list.Items)
		}
	}

	// One stored without an error (cancelled by an earlier host, here
	// imported so) is answered with one all the same.
	var state map[string]any
	h.do("GET", "/v1/instances/with-reason/state", nil).want(t, http.StatusOK).json(t, &state)
	inst := state["instance"].(map[string]any)
	delete(inst, "error")
	inst["id"] = "old-cancel"
	body, err := json.Marshal(state)
	if err != nil {
		t.Fatal(err)
	}
	var imported instance
	h.request("PUT", "/v1/instances/old-cancel/state", adminSecret, "application/json", body).want(t, http.StatusCreated).json(t, &imported)
	var e struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(imported.Error, &e); err != nil || imported.Status != "cancelled" || e.Code != "cancelled" || !strings.Contains(e.Message, "history") {
		t.Fatalf("imported cancelled instance without an error: %s %s (%v), want code cancelled pointing to the history", imported.Status, imported.Error, err)
	}
}
