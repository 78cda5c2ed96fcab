package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api/apiv1"
)

// plainFlow sets no priority and no fairness: its instances are at the
// default priority, in the shared lane.
const plainFlow = `
name: plain
steps:
  - { id: s, set: { n: 1 } }
`

// tieredFlow computes its priority and its fairness key from the input.
const tieredFlow = `
name: tiered
priority: "${ input.plan == 'pro' ? 2 : 4 }"
fairness: { key: "${ input.tenant }", weight: 3 }
steps:
  - { id: s, set: { n: 1 } }
`

// TestStartPriority: a start's priority is the instance's, before the
// one its definition computes; without one (absent or 0) the instance has
// its definition's, 3 when it sets none. The answer shows the priority
// always, and the fairness key with its weight when the instance has a
// key. A priority out of 1–5, or not an integer, is a 400 naming
// priority, and starts nothing; a start answered with an existing
// instance keeps that instance's.
func TestStartPriority(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("plain", plainFlow)
	h.putWorkflow("tiered", tieredFlow)

	tests := []struct {
		name       string
		workflow   string
		body       map[string]any
		wait       bool
		wantPrio   int
		wantKey    string
		wantWeight int
	}{
		{name: "the start's", workflow: "plain", body: map[string]any{"priority": 1}, wantPrio: 1},
		{name: "the start's, with a wait", workflow: "plain", body: map[string]any{"priority": 5}, wait: true, wantPrio: 5},
		{name: "none: the default", workflow: "plain", body: map[string]any{}, wantPrio: 3},
		{name: "0: the default", workflow: "plain", body: map[string]any{"priority": 0}, wait: true, wantPrio: 3},
		{name: "none: the definition's", workflow: "tiered", body: map[string]any{"input": map[string]any{"plan": "pro", "tenant": "acme"}}, wantPrio: 2, wantKey: "acme", wantWeight: 3},
		{name: "computed otherwise", workflow: "tiered", body: map[string]any{"input": map[string]any{"plan": "free", "tenant": "initech"}}, wait: true, wantPrio: 4, wantKey: "initech", wantWeight: 3},
		{name: "the start's before the definition's", workflow: "tiered", body: map[string]any{"priority": 1, "input": map[string]any{"plan": "free", "tenant": "acme"}}, wantPrio: 1, wantKey: "acme", wantWeight: 3},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			id := "prio-" + string(rune('a'+i))
			tt.body["id"] = id
			path := "/v1/workflows/" + tt.workflow + "/instances"
			if tt.wait {
				path += "?wait=30s"
			}
			var got apiv1.Instance
			h.do("POST", path, tt.body).want(t, http.StatusCreated).json(t, &got)
			var read apiv1.Instance
			h.do("GET", "/v1/instances/"+id, nil).want(t, http.StatusOK).json(t, &read)
			var list pageDoc[apiv1.Instance]
			h.do("GET", "/v1/instances?id="+id, nil).want(t, http.StatusOK).json(t, &list)
			if len(list.Items) != 1 {
				t.Fatalf("the list by id has %d instances, want 1", len(list.Items))
			}
			for what, in := range map[string]apiv1.Instance{"the start's answer": got, "the instance": read, "the list": list.Items[0]} {
				if in.Priority != tt.wantPrio || in.FairnessKey != tt.wantKey || in.FairnessWeight != tt.wantWeight {
					t.Errorf("%s: priority %d, fairness key %q, weight %d; want %d, %q, %d",
						what, in.Priority, in.FairnessKey, in.FairnessWeight, tt.wantPrio, tt.wantKey, tt.wantWeight)
				}
			}
		})
	}

	// The wire: priority always, the fairness fields only with a key.
	r := h.do("GET", "/v1/instances/prio-c", nil).want(t, http.StatusOK)
	if body := string(r.body); !strings.Contains(body, `"priority":3`) || strings.Contains(body, "fairness_") {
		t.Errorf("an instance at the default priority in the shared lane answers %s; want priority 3 and no fairness field", body)
	}

	// The same id again, with another priority: the instance as it is.
	var again apiv1.Instance
	h.do("POST", "/v1/workflows/plain/instances", map[string]any{"id": "prio-a", "priority": 4}).want(t, http.StatusOK).json(t, &again)
	if again.Priority != 1 {
		t.Errorf("a retried start with another priority answers priority %d, want the instance's, 1", again.Priority)
	}

	// A computed priority that does not fit the input: a 400 naming the
	// field, and nothing created.
	h.putWorkflow("by-tier", "name: by-tier\npriority: \"${ input.tier }\"\nsteps:\n  - { id: s, set: { n: 1 } }\n")
	p := h.do("POST", "/v1/workflows/by-tier/instances", map[string]any{"id": "tier-7", "input": map[string]any{"tier": 7}}).
		want(t, http.StatusBadRequest).problem(t)
	if p.Type != "urn:weft:problem:invalid-request" || !strings.Contains(p.Detail, "priority") {
		t.Errorf("a computed priority of 7: problem %+v, want invalid-request naming priority", p)
	}
	h.do("GET", "/v1/instances/tier-7", nil).want(t, http.StatusNotFound)

	bad := []struct {
		name     string
		priority any
		wantMsg  string
	}{
		{"above 5", 6, "must be from 1 (served first) to 5 (served last), got 6"},
		{"below 1", -1, "got -1"},
		{"a word", "high", "expected int"},
		{"a fraction", 2.5, "expected int"},
	}
	for _, tt := range bad {
		t.Run("refused/"+tt.name, func(t *testing.T) {
			for _, wait := range []string{"", "?wait=5s"} {
				id := "refused-" + strings.ReplaceAll(tt.name, " ", "-")
				p := h.do("POST", "/v1/workflows/plain/instances"+wait, map[string]any{"id": id, "priority": tt.priority}).
					want(t, http.StatusBadRequest).problem(t)
				if p.Type != "urn:weft:problem:invalid-request" || len(p.Errors) != 1 || p.Errors[0].Path != "priority" || !strings.Contains(p.Errors[0].Message, tt.wantMsg) {
					t.Errorf("priority %v%s: problem %+v, want invalid-request naming priority with %q", tt.priority, wait, p, tt.wantMsg)
				}
				h.do("GET", "/v1/instances/"+id, nil).want(t, http.StatusNotFound)
			}
		})
	}
}

// TestEventPriority: an event's priority is that of the instances its
// triggers start, before their definitions'; without one they have their
// definitions'. An instance it resumes keeps its own. A priority out of
// 1–5 is a 422 naming priority, like the event's other fields, and a
// priority that is not an integer a 400; neither starts anything.
func TestEventPriority(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("on-order", `
name: on-order
triggers: [ { event: order.created } ]
steps:
  - { id: s, set: { n: 1 } }
`)
	h.putWorkflow("tiered-on-order", strings.Replace(strings.Replace(tieredFlow, "name: tiered", "name: tiered-on-order", 1),
		"steps:", "triggers: [ { event: tiered.created } ]\nsteps:", 1))
	h.putWorkflow("waits", `
name: waits
priority: 5
steps:
  - { id: w, wait: { event: order.paid, key: "${ input.k }" }, output: paid }
`)

	tests := []struct {
		name     string
		body     map[string]any
		wantPrio int
		wantKey  string
	}{
		{name: "the event's", body: map[string]any{"name": "order.created", "priority": 1}, wantPrio: 1},
		{name: "none: the default", body: map[string]any{"name": "order.created"}, wantPrio: 3},
		{name: "none: the definition's", body: map[string]any{"name": "tiered.created", "payload": map[string]any{"plan": "pro", "tenant": "acme"}}, wantPrio: 2, wantKey: "acme"},
		{name: "the event's before the definition's", body: map[string]any{"name": "tiered.created", "priority": 5, "payload": map[string]any{"plan": "pro", "tenant": "acme"}}, wantPrio: 5, wantKey: "acme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out apiv1.EventOutcome
			h.do("POST", "/v1/events", tt.body).want(t, http.StatusAccepted).json(t, &out)
			if len(out.Started) != 1 {
				t.Fatalf("the event started %v, want one instance", out.Started)
			}
			var in apiv1.Instance
			h.do("GET", "/v1/instances/"+out.Started[0], nil).want(t, http.StatusOK).json(t, &in)
			if in.Priority != tt.wantPrio || in.FairnessKey != tt.wantKey {
				t.Errorf("the started instance has priority %d, fairness key %q; want %d, %q", in.Priority, in.FairnessKey, tt.wantPrio, tt.wantKey)
			}
		})
	}

	// A resumed instance keeps its own priority.
	h.do("POST", "/v1/workflows/waits/instances", map[string]any{"id": "waits-1", "input": map[string]any{"k": "o-1"}}).want(t, http.StatusCreated)
	h.awaitStatus("waits-1", "suspended")
	var out apiv1.EventOutcome
	h.do("POST", "/v1/events", map[string]any{"name": "order.paid", "key": "o-1", "priority": 1}).want(t, http.StatusAccepted).json(t, &out)
	if len(out.Resumed) != 1 || out.Resumed[0] != "waits-1" {
		t.Fatalf("the event resumed %v, want waits-1", out.Resumed)
	}
	h.awaitStatus("waits-1", "completed")
	var resumed apiv1.Instance
	h.do("GET", "/v1/instances/waits-1", nil).want(t, http.StatusOK).json(t, &resumed)
	if resumed.Priority != 5 {
		t.Errorf("the resumed instance has priority %d, want its own, 5", resumed.Priority)
	}

	p := h.do("POST", "/v1/events", map[string]any{"name": "order.created", "id": "ev-6", "priority": 6}).want(t, http.StatusUnprocessableEntity).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Path != "priority" || !strings.Contains(p.Errors[0].Message, "got 6") {
		t.Errorf("an event with priority 6: problem %+v, want one error naming priority", p)
	}
	p = h.do("POST", "/v1/events", map[string]any{"name": "order.created", "id": "ev-high", "priority": "high"}).want(t, http.StatusBadRequest).problem(t)
	if len(p.Errors) != 1 || p.Errors[0].Path != "priority" {
		t.Errorf("an event with priority \"high\": problem %+v, want one error naming priority", p)
	}
	for _, id := range []string{"stim-ev-6-on-order", "stim-ev-high-on-order"} {
		h.do("GET", "/v1/instances/"+id, nil).want(t, http.StatusNotFound)
	}
}
