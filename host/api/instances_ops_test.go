package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/api"
	"github.com/weftworks/weft/host/api/apiv1"
)

// resetFlow records its variables at each top-level step; a reset to x
// runs x again with a = 1.
const resetFlow = `
name: again
steps:
  - id: one
    set: { a: 1 }
  - { id: x, activity: kit.echo, input: "${ vars.a }", output: xr }
  - id: two
    set: { a: 2 }
output: "${ vars.xr }"
`

// TestResetInstance: the reset points of a completed instance are its
// top-level steps with their variables; a reset to one runs the instance
// again from there, recording who asked; a step it cannot be reset to is
// a conflict saying why, a missing step a 400, no instance a 404.
func TestResetInstance(t *testing.T) {
	t.Parallel()
	o := hostOptions{api: api.Config{Tokens: testTokens()}}
	o.node.Engine.VarsLimit = 1 << 16
	h := newHostWith(t, o)
	h.pushKit()
	h.putWorkflow("again", resetFlow)
	h.do("POST", "/v1/workflows/again/instances?wait=30s", map[string]any{"id": "r-1"}).want(t, http.StatusCreated)

	var points apiv1.Page[apiv1.ResetPoint]
	h.request("GET", "/v1/instances/r-1/reset-points", readerSecret, "", nil).want(t, http.StatusOK).json(t, &points)
	if len(points.Items) != 3 || points.Items[1].Step != "x" || points.Items[1].Index != 1 || !points.Items[1].Vars || points.Items[1].Seq == 0 {
		t.Fatalf("reset points %+v, want one, x and two, with their variables", points.Items)
	}

	var in instance
	h.request("POST", "/v1/instances/r-1/reset", operatorSecret, "application/json", []byte(`{"step":"x","reason":"again"}`)).want(t, http.StatusAccepted).json(t, &in)
	if in.ID != "r-1" {
		t.Errorf("reset answered %+v", in)
	}
	e := h.awaitEntry("r-1", "instance_reset")
	var data struct{ Step, Reason, FromStatus string }
	if err := json.Unmarshal(e.Data, &data); err != nil || e.Actor != "ops" || data.Step != "x" || data.Reason != "again" {
		t.Errorf("instance_reset by %q with %s", e.Actor, e.Data)
	}
	h.awaitStatus("r-1", "completed")

	for _, tc := range []struct {
		body   string
		status int
		want   string
	}{
		{`{"step":"nope"}`, http.StatusConflict, `has no top-level step "nope"`},
		{`{}`, http.StatusBadRequest, "step: is required"},
		{`{"step":"x","stpe":1}`, http.StatusBadRequest, "stpe: unknown field"},
	} {
		if p := h.do("POST", "/v1/instances/r-1/reset", json.RawMessage(tc.body)).want(t, tc.status).problem(t); !strings.Contains(p.Detail, tc.want) {
			t.Errorf("reset %s: %s, want it to say %q", tc.body, p.Detail, tc.want)
		}
	}
	h.do("POST", "/v1/instances/nope/reset", map[string]any{"step": "x"}).want(t, http.StatusNotFound)
	h.do("GET", "/v1/instances/nope/reset-points", nil).want(t, http.StatusNotFound)
}

// rollV1 fails at b for an instance that does not wait, and waits at hold
// for one that does; rollV2 fixes b and no longer has hold.
const (
	rollV1 = `
name: roll
steps:
  - { id: a, activity: kit.echo, input: "${ input.n }", output: a }
  - id: route
    if: "${ input.wait }"
    then:
      - { id: hold, wait: { event: go, key: "${ input.k }" } }
  - { id: b, activity: kit.fail, input: { message: "the bad release" }, retry: { max_attempts: 1 } }
output: "${ vars.b }"
`
	rollV2 = `
name: roll
steps:
  - { id: a, activity: kit.echo, input: "${ input.n }", output: a }
  - id: route
    if: "${ input.wait }"
    then:
      - { id: other, activity: kit.echo, input: 0 }
  - { id: b, activity: kit.echo, input: { message: "the bad release" }, output: b }
output: "${ vars.b.message }"
`
)

// TestMigrateInstance: a dry run says a failed instance can move, and
// sends nothing; one that cannot move is a conflict whose problem carries
// the plan; the move with a retry completes the instance on the new
// version. A migration needs the admin role; its body is checked.
func TestMigrateInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("roll", rollV1)
	h.do("POST", "/v1/workflows/roll/instances?wait=30s", map[string]any{"id": "m-1", "input": map[string]any{"n": 1, "wait": false}}).want(t, http.StatusCreated)
	h.awaitStatus("m-1", "failed")
	h.do("POST", "/v1/workflows/roll/instances?wait=30s&until=suspended", map[string]any{"id": "m-2", "input": map[string]any{"n": 2, "wait": true, "k": "w"}}).want(t, http.StatusCreated)
	h.request("PUT", "/v1/workflows/roll", adminSecret, "application/yaml", []byte(rollV2)).want(t, http.StatusCreated)

	var plan apiv1.MigrationPlan
	h.do("POST", "/v1/instances/m-1/migrate", map[string]any{"dry_run": true}).want(t, http.StatusOK).json(t, &plan)
	if !plan.CanMove || plan.Instance != "m-1" || plan.FromVersion != 1 || plan.ToVersion != 2 || len(plan.At) != 1 || plan.At[0].Step != "b" || len(plan.Problems) != 0 || len(plan.Notes) == 0 {
		t.Fatalf("dry run: %+v", plan)
	}
	if in := h.awaitStatus("m-1", "failed"); in.Version != 1 {
		t.Errorf("a dry run moved the instance to version %d", in.Version)
	}

	p := h.do("POST", "/v1/instances/m-2/migrate", nil).want(t, http.StatusConflict).problem(t)
	if p.Migration == nil || p.Migration.CanMove || len(p.Migration.Problems) == 0 || p.Migration.Problems[0].Step != "hold" || !strings.Contains(p.Detail, `instance "m-2" cannot move from version 1 to 2: step hold`) {
		t.Fatalf("migrate of the waiting instance: %+v (plan %+v)", p, p.Migration)
	}

	h.request("POST", "/v1/instances/m-1/migrate", operatorSecret, "application/json", []byte(`{}`)).want(t, http.StatusForbidden)
	h.do("POST", "/v1/instances/m-1/migrate", map[string]any{"then": "retry", "reason": "roll forward"}).want(t, http.StatusAccepted).json(t, &plan)
	if !plan.CanMove || plan.ToVersion != 2 {
		t.Errorf("the move: %+v", plan)
	}
	if in := h.awaitStatus("m-1", "completed"); in.Version != 2 || string(in.Output) != `"the bad release"` {
		t.Errorf("the moved instance: version %d, output %s", in.Version, in.Output)
	}
	e := h.awaitEntry("m-1", "instance_migrated")
	var data struct {
		FromVersion int `json:"from_version"`
		ToVersion   int `json:"to_version"`
		Reason      string
	}
	if err := json.Unmarshal(e.Data, &data); err != nil || e.Actor != "ci" || data.FromVersion != 1 || data.ToVersion != 2 || data.Reason != "roll forward" {
		t.Errorf("instance_migrated by %q with %s", e.Actor, e.Data)
	}

	for _, tc := range []struct {
		body   string
		status int
		path   string
	}{
		{`{"then":"later"}`, http.StatusBadRequest, "then"},
		{`{"version":-1}`, http.StatusBadRequest, "version"},
		{`{"plugins":{"kit":"abc"}}`, http.StatusBadRequest, "plugins.kit"},
		{`{"plugins":{"Kit!":"` + strings.Repeat("a", 64) + `"}}`, http.StatusBadRequest, "plugins.Kit!"},
	} {
		if p := h.do("POST", "/v1/instances/m-2/migrate", json.RawMessage(tc.body)).want(t, tc.status).problem(t); len(p.Errors) != 1 || p.Errors[0].Path != tc.path {
			t.Errorf("migrate %s: %+v, want a problem at %s", tc.body, p, tc.path)
		}
	}
	if p := h.do("POST", "/v1/instances/m-2/migrate", map[string]any{"version": 9, "dry_run": true}).want(t, http.StatusNotFound).problem(t); !strings.Contains(p.Detail, "version 9") {
		t.Errorf("migrate to no such version: %s", p.Detail)
	}
	h.do("POST", "/v1/instances/nope/migrate", nil).want(t, http.StatusNotFound)
}
