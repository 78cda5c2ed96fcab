package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
)

// TestEventNamesFollowTheDefinitionsRule: an event whose name no definition
// could wait for is refused, naming the field; one that no saved workflow
// waits for or is triggered by is queued with a warning (a typo, as a
// rule), and one that a workflow waits for is queued without.
func TestEventNamesFollowTheDefinitionsRule(t *testing.T) {
	t.Parallel()
	h := newHostWith(t, hostOptions{api: api.Config{Tokens: testTokens()}})
	h.pushKit()
	h.putWorkflow("approval", `
name: approval
steps:
  - { id: w, wait: { event: order.approved, key: "${ input.id }" }, output: by }
output: "${ vars.by }"
`)
	p := h.do("POST", "/v1/events", map[string]any{"name": "bad name!"}).want(t, http.StatusUnprocessableEntity).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Path != "name" || !strings.Contains(p.Errors[0].Message, `invalid event name "bad name!"`) {
		t.Fatalf("problem = %+v", p)
	}

	var out struct {
		Queued  bool   `json:"queued"`
		Warning string `json:"warning"`
	}
	h.do("POST", "/v1/events", map[string]any{"name": "order.aproved", "key": "o-1"}).want(t, http.StatusAccepted).json(t, &out)
	if !out.Queued || !strings.Contains(out.Warning, `no saved workflow waits for or is triggered by "order.aproved"`) {
		t.Fatalf("misspelt event: %+v", out)
	}
	out.Warning = ""
	h.do("POST", "/v1/events", map[string]any{"name": "order.approved", "key": "o-1"}).want(t, http.StatusAccepted).json(t, &out)
	if !out.Queued || out.Warning != "" {
		t.Fatalf("event a workflow waits for: %+v", out)
	}

	// Version 2 renames the event; an instance started on version 1 still
	// waits for the old name, which is no typo.
	h.putWorkflow("approval", `
name: approval
steps:
  - { id: w, wait: { event: order.accepted, key: "${ input.id }" }, output: by }
output: "${ vars.by }"
`)
	out.Warning = ""
	h.do("POST", "/v1/events", map[string]any{"name": "order.approved", "key": "o-2"}).want(t, http.StatusAccepted).json(t, &out)
	if !out.Queued || out.Warning != "" {
		t.Fatalf("event an older version waits for: %+v", out)
	}
	h.do("DELETE", "/v1/workflows/approval", nil).want(t, http.StatusNoContent)
	h.do("POST", "/v1/events", map[string]any{"name": "order.approved", "key": "o-3"}).want(t, http.StatusAccepted).json(t, &out)
	if !strings.Contains(out.Warning, `no saved workflow waits for or is triggered by "order.approved"`) {
		t.Fatalf("event only a deleted workflow waited for: %+v", out)
	}
}
