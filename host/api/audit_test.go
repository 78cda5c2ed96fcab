package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
)

// aliceSecret is the secret of the operator token named alice.
const aliceSecret = "alice-secret-0123456789"

// declineFlow fails at its one step, at once.
const declineFlow = `
name: failing
steps:
  - id: charge
    activity: kit.fail
    input: { code: declined, message: card declined }
    retry: { max_attempts: 1 }
`

// history reads an instance's whole history, with the token.
func (h *host) history(id, token string) []apiv1.HistoryEntry {
	h.t.Helper()
	var page apiv1.Page[apiv1.HistoryEntry]
	h.request("GET", "/v1/instances/"+id+"/history?limit=1000", token, "", nil).want(h.t, http.StatusOK).json(h.t, &page)
	return page.Items
}

// awaitEntry waits for the instance's history to have an entry of typ,
// and returns the first.
func (h *host) awaitEntry(id, typ string) apiv1.HistoryEntry {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, e := range h.history(id, adminSecret) {
			if string(e.Type) == typ {
				return e
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("instance %s: no %s entry in its history after 30s", id, typ)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// TestOperatorActionsRecordTheirActor: a cancel, a bulk cancel, a retry
// and an import record the name of the request's token as the actor of
// their history entry, and the reason and the time of the request in its
// data, as GET /v1/instances/{id}/history answers them; a delete, whose
// history goes with the instance, is logged with its actor. Without
// tokens, the actor is anonymous.
func TestOperatorActionsRecordTheirActor(t *testing.T) {
	t.Parallel()
	tokens := append(testTokens(), api.Token{Name: "alice", Role: api.RoleOperator, Token: aliceSecret})
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: tokens}})
	h.pushKit()
	h.putWorkflow("hold", holdFlow)
	h.putWorkflow("failing", declineFlow)
	post := func(path, token string, body any) response {
		t.Helper()
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		return h.request("POST", path, token, "application/json", b)
	}
	for _, id := range []string{"h-1", "h-2", "h-3"} {
		h.do("POST", "/v1/workflows/hold/instances?wait=30s&until=suspended", map[string]any{"id": id}).want(t, http.StatusCreated)
	}
	h.do("POST", "/v1/workflows/failing/instances?wait=30s", map[string]any{"id": "f-1"}).want(t, http.StatusCreated)
	h.awaitStatus("f-1", "failed")

	before := time.Now()
	post("/v1/instances/h-1/cancel", aliceSecret, map[string]any{"reason": "customer left"}).want(t, http.StatusAccepted)
	post("/v1/instances/cancel", aliceSecret, map[string]any{"ids": []string{"h-2"}, "reason": "batch withdrawn"}).want(t, http.StatusOK)
	post("/v1/instances/h-3/cancel", operatorSecret, map[string]any{}).want(t, http.StatusAccepted)
	post("/v1/instances/f-1/retry", aliceSecret, map[string]any{"reason": "card fixed"}).want(t, http.StatusAccepted)
	after := time.Now()

	tests := []struct {
		id, typ, actor, reason string
	}{
		{"h-1", "instance_cancelled", "alice", "customer left"},
		{"h-2", "instance_cancelled", "alice", "batch withdrawn"},
		{"h-3", "instance_cancelled", "ops", "cancelled through the API"},
		{"f-1", "instance_retried", "alice", "card fixed"},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			e := h.awaitEntry(tt.id, tt.typ)
			// As a reader sees it too.
			for _, r := range h.history(tt.id, readerSecret) {
				if r.Seq == e.Seq && r.Actor != e.Actor {
					t.Errorf("a reader sees actor %q, the admin %q", r.Actor, e.Actor)
				}
			}
			var data struct {
				Reason      string    `json:"reason"`
				RequestedAt time.Time `json:"requested_at"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatalf("%s data %s: %v", tt.typ, e.Data, err)
			}
			if e.Actor != tt.actor || data.Reason != tt.reason {
				t.Errorf("%s of %s: actor %q, reason %q; want %q, %q", tt.typ, tt.id, e.Actor, data.Reason, tt.actor, tt.reason)
			}
			if data.RequestedAt.Before(before) || data.RequestedAt.After(after) {
				t.Errorf("%s of %s: requested_at %s, want the request's time, within [%s, %s]", tt.typ, tt.id, data.RequestedAt, before, after)
			}
		})
	}
	// The other entries have no actor.
	for _, e := range h.history("h-1", adminSecret) {
		if e.Type != "instance_cancelled" && e.Actor != "" {
			t.Errorf("h-1's %s entry has actor %q, want none", e.Type, e.Actor)
		}
	}

	// An import, as a copy, records its actor beside where it came from.
	var state json.RawMessage
	h.do("GET", "/v1/instances/h-1/state", nil).want(t, http.StatusOK).json(t, &state)
	h.request("PUT", "/v1/instances/h-1-copy/state", adminSecret, "application/json", state).want(t, http.StatusCreated)
	imported := h.awaitEntry("h-1-copy", "instance_imported")
	if !strings.Contains(string(imported.Data), `"from":"h-1"`) || imported.Actor != "ci" {
		t.Errorf("instance_imported: actor %q, data %s; want by ci, from h-1", imported.Actor, imported.Data)
	}

	// A delete is logged with its actor.
	h.request("DELETE", "/v1/instances/h-1-copy", adminSecret, "", nil).want(t, http.StatusNoContent)
	logged := false
	for line := range strings.Lines(h.logs.String()) {
		logged = logged || strings.Contains(line, `"msg":"instance deleted"`) && strings.Contains(line, `"instance":"h-1-copy"`) && strings.Contains(line, `"actor":"ci"`)
	}
	if !logged {
		t.Errorf("no log line of the delete with its actor:\n%s", h.logs.String())
	}

	// Without tokens, no one is named.
	open := newHostWith(t, hostOptions{api: api.Config{}})
	open.putWorkflow("hold", holdFlow)
	open.do("POST", "/v1/workflows/hold/instances?wait=30s&until=suspended", map[string]any{"id": "o-1"}).want(t, http.StatusCreated)
	open.do("POST", "/v1/instances/o-1/cancel", map[string]any{"reason": "test"}).want(t, http.StatusAccepted)
	if e := open.awaitEntry("o-1", "instance_cancelled"); e.Actor != "anonymous" {
		t.Errorf("without tokens, the cancel's actor is %q, want anonymous", e.Actor)
	}
}
