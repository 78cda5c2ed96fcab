package api_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"
)

// Pause and resume of one instance (docs/operations.md, "Pause and
// resume"; docs/http-api.md, "Instances").

// pauseFlow waits for an event, then echoes its payload with the kit.
const pauseFlow = `
name: pausable
steps:
  - id: review
    wait: { event: review.done, key: "${ input.k }", timeout: 1h }
    output: got
  - { id: echo, activity: kit.echo, input: "${ vars.got.n }", output: n }
output: "${ vars.n }"
`

// pausedDoc is an instance document with its pause.
type pausedDoc struct {
	ID     string          `json:"id"`
	Status string          `json:"status"`
	Output json.RawMessage `json:"output"`
	Paused *struct {
		Since  time.Time `json:"since"`
		Actor  string    `json:"actor"`
		Reason string    `json:"reason"`
		Batch  string    `json:"batch"`
		Held   int       `json:"held"`
	} `json:"paused"`
}

// historyDoc is a history entry as the tests here read it.
type historyDoc struct {
	Type  string         `json:"type"`
	Actor string         `json:"actor"`
	Data  map[string]any `json:"data"`
}

// historyOf reads an instance's whole history.
func (h *host) historyOf(id string) []historyDoc {
	h.t.Helper()
	var p pageDoc[historyDoc]
	h.do("GET", "/v1/instances/"+id+"/history?limit=1000", nil).want(h.t, http.StatusOK).json(h.t, &p)
	return p.Items
}

// typesOf lists the types of the entries.
func typesOf(evs []historyDoc) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// awaitPaused polls the instance until it is paused, and returns it.
func (h *host) awaitPaused(id string, done func(pausedDoc) bool) pausedDoc {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var in pausedDoc
		h.do("GET", "/v1/instances/"+id, nil).want(h.t, http.StatusOK).json(h.t, &in)
		if done(in) {
			return in
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("instance %s is %s with pause %+v after a minute", id, in.Status, in.Paused)
		}
		time.Sleep(5 * time.Millisecond) // polling, with a deadline
	}
}

// TestPauseAndResumeAnInstance: an operator pauses a suspended instance
// (a reader may not); it is then paused, shows who paused it and why, is
// found by its status in a list, a count and a query, and holds the event
// sent for its wait; a resume applies the event and the instance
// completes with its payload. The history records the pause, the held
// event and the resume with their actors and reasons. A second pause
// writes nothing. A resume of an instance that is not paused, and either
// of a finished one, is a 409; of none, a 404.
func TestPauseAndResumeAnInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("pausable", pauseFlow)
	h.do("POST", "/v1/workflows/pausable/instances?wait=30s&until=suspended", map[string]any{"id": "p-1", "input": map[string]any{"k": "k1"}}).
		want(t, http.StatusCreated)

	h.request("POST", "/v1/instances/p-1/pause", readerSecret, "", nil).want(t, http.StatusForbidden)
	h.do("POST", "/v1/instances/nobody/pause", nil).want(t, http.StatusNotFound)
	h.do("POST", "/v1/instances/nobody/resume", nil).want(t, http.StatusNotFound)
	if p := h.do("POST", "/v1/instances/p-1/resume", nil).want(t, http.StatusConflict).problem(t); p.Detail != `instance "p-1" is not paused: it is suspended` {
		t.Errorf("resume of a suspended instance: %q", p.Detail)
	}
	h.request("POST", "/v1/instances/p-1/pause", operatorSecret, "application/json", []byte(`{"reason": "bad rollout", "extra": 1}`)).
		want(t, http.StatusBadRequest)

	var answered pausedDoc
	h.request("POST", "/v1/instances/p-1/pause", operatorSecret, "application/json", []byte(`{"reason": "bad rollout"}`)).
		want(t, http.StatusAccepted).json(t, &answered)
	if answered.ID != "p-1" || answered.Status == "" {
		t.Fatalf("the pause answered %+v, want the instance", answered)
	}
	in := h.awaitPaused("p-1", func(in pausedDoc) bool { return in.Status == "paused" })
	if p := in.Paused; p == nil || p.Actor != "ops" || p.Reason != "bad rollout" || p.Held != 0 || p.Since.IsZero() {
		t.Fatalf("paused p-1 shows the pause %+v, want ops's, for a bad rollout, since a time, holding nothing", in.Paused)
	}

	// Found by its status; the list does not read the pause.
	var list pageDoc[map[string]json.RawMessage]
	h.do("GET", "/v1/instances?status=paused", nil).want(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 1 || string(list.Items[0]["id"]) != `"p-1"` || list.Items[0]["paused"] != nil {
		t.Errorf("the list of paused instances is %v, want p-1 alone, without its pause", list.Items)
	}
	h.do("GET", "/v1/instances?q="+url.QueryEscape(`status = "paused"`), nil).want(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 1 || string(list.Items[0]["id"]) != `"p-1"` {
		t.Errorf("the query status = \"paused\" finds %v, want p-1", list.Items)
	}
	var counts struct {
		ByStatus map[string]int `json:"by_status"`
	}
	h.do("GET", "/v1/counts/instances", nil).want(t, http.StatusOK).json(t, &counts)
	if n, ok := counts.ByStatus["paused"]; !ok || n != 1 {
		t.Errorf("counts by status %v, want paused: 1", counts.ByStatus)
	}

	// The event for its wait is held, not applied.
	h.do("POST", "/v1/events", map[string]any{"name": "review.done", "key": "k1", "payload": map[string]any{"n": 7}}).want(t, http.StatusAccepted)
	in = h.awaitPaused("p-1", func(in pausedDoc) bool { return in.Paused != nil && in.Paused.Held == 1 })
	if in.Status != "paused" {
		t.Fatalf("p-1 is %s holding the event, want paused", in.Status)
	}

	// A second pause changes nothing: the answer shows the first.
	h.request("POST", "/v1/instances/p-1/pause", adminSecret, "application/json", []byte(`{"reason": "again"}`)).
		want(t, http.StatusAccepted).json(t, &answered)
	if answered.Status != "paused" || answered.Paused == nil || answered.Paused.Actor != "ops" || answered.Paused.Reason != "bad rollout" {
		t.Errorf("a pause of a paused instance answered %s with %+v, want it paused by ops", answered.Status, answered.Paused)
	}

	h.request("POST", "/v1/instances/p-1/resume", operatorSecret, "", nil).want(t, http.StatusAccepted)
	done := h.awaitStatus("p-1", "completed")
	if string(done.Output) != "7" {
		t.Errorf("output %s, want the held event's 7", done.Output)
	}

	evs := h.historyOf("p-1")
	types := typesOf(evs)
	i, j, k := slices.Index(types, "instance_paused"), slices.Index(types, "event_held"), slices.Index(types, "instance_resumed")
	if i < 0 || j < i || k < j || slices.Index(types, "bookmark_resumed") < k {
		t.Fatalf("history %v: want instance_paused, event_held, instance_resumed, then the bookmark resumed", types)
	}
	if e := evs[i]; e.Actor != "ops" || e.Data["reason"] != "bad rollout" || e.Data["requested_at"] == nil {
		t.Errorf("instance_paused: actor %q, data %v; want ops, the reason and requested_at", e.Actor, e.Data)
	}
	if e := evs[k]; e.Actor != "ops" || e.Data["reason"] != "resumed through the API" || e.Data["held"] != float64(1) {
		t.Errorf("instance_resumed: actor %q, data %v; want ops, the default reason, held 1", e.Actor, e.Data)
	}
	if e := evs[j]; e.Data["event"] != "stimulus_delivered" {
		t.Errorf("event_held: data %v, want the stimulus", e.Data)
	}
	// The second pause wrote nothing.
	if n := strings.Count(strings.Join(types, " "), "instance_paused"); n != 1 || slices.Contains(types, "event_ignored") {
		t.Errorf("history %v: want one instance_paused, and nothing of the second pause", types)
	}

	// Finished: neither applies.
	for _, action := range []string{"pause", "resume"} {
		if p := h.do("POST", "/v1/instances/p-1/"+action, nil).want(t, http.StatusConflict).problem(t); !strings.Contains(p.Detail, "completed already") {
			t.Errorf("%s of a completed instance: %q", action, p.Detail)
		}
	}
}

// gateFlow lets one instance at a time run: a first step that echoes,
// then a wait.
const gateFlow = `
name: gate
concurrency: { limit: 1 }
steps:
  - { id: prep, activity: kit.echo, input: 1 }
  - id: review
    wait: { event: gate.open, key: "${ input.k }", timeout: 1h }
output: done
`

// TestPauseOfPendingInstance: an instance paused while pending (here,
// waiting for its workflow's only slot) applies the pause when it starts:
// its first step begins and its attempt completes, and it pauses before
// the second. Paused, it keeps its slot. A pause and a resume sent while
// pending both apply, in order, once it starts.
func TestPauseOfPendingInstance(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("gate", gateFlow)
	h.do("POST", "/v1/workflows/gate/instances?wait=30s&until=suspended", map[string]any{"id": "g-1", "input": map[string]any{"k": "1"}}).
		want(t, http.StatusCreated)
	for _, id := range []string{"g-2", "g-3"} {
		h.do("POST", "/v1/workflows/gate/instances", map[string]any{"id": id, "input": map[string]any{"k": id}}).want(t, http.StatusCreated)
	}
	var answered pausedDoc
	h.do("POST", "/v1/instances/g-2/pause", map[string]any{"reason": "hold it"}).want(t, http.StatusAccepted).json(t, &answered)
	if answered.Status != "pending" || answered.Paused != nil {
		t.Fatalf("the pause of a pending instance answered %s with %+v, want it pending, its pause on its way", answered.Status, answered.Paused)
	}
	// A resume finds the pause on its way: accepted.
	h.do("POST", "/v1/instances/g-3/pause", nil).want(t, http.StatusAccepted)
	h.do("POST", "/v1/instances/g-3/resume", nil).want(t, http.StatusAccepted)

	// g-1 ends; g-2 starts, runs its first step, and pauses.
	h.do("POST", "/v1/events", map[string]any{"name": "gate.open", "key": "1"}).want(t, http.StatusAccepted)
	h.awaitStatus("g-1", "completed")
	in := h.awaitPaused("g-2", func(in pausedDoc) bool { return in.Status == "paused" })
	if in.Paused == nil || in.Paused.Reason != "hold it" {
		t.Errorf("g-2's pause is %+v, want the reason given", in.Paused)
	}
	types := typesOf(h.historyOf("g-2"))
	started, paused := slices.Index(types, "instance_started"), slices.Index(types, "instance_paused")
	if started < 0 || paused < started || !slices.Contains(types, "activity_completed") || slices.Contains(types, "bookmark_created") {
		t.Errorf("g-2's history %v: want it started, its first step's attempt completed, paused, and its wait never begun", types)
	}
	// Paused, it holds the slot: g-3 still waits for it.
	var line struct {
		Key struct {
			Running int `json:"running"`
			Waiting int `json:"waiting"`
		} `json:"key"`
	}
	h.do("GET", "/v1/concurrency/gate", nil).want(t, http.StatusOK).json(t, &line)
	if key := line.Key; key.Running != 1 || key.Waiting != 1 {
		t.Errorf("the gate's key has %d running and %d waiting, want the paused g-2 holding the slot and g-3 waiting", key.Running, key.Waiting)
	}

	h.do("POST", "/v1/instances/g-2/resume", nil).want(t, http.StatusAccepted)
	h.awaitStatus("g-2", "suspended")
	h.do("POST", "/v1/events", map[string]any{"name": "gate.open", "key": "g-2"}).want(t, http.StatusAccepted)
	h.awaitStatus("g-2", "completed")
	// g-3's pause and resume applied in order when it started: it runs on.
	h.awaitStatus("g-3", "suspended")
	types = typesOf(h.historyOf("g-3"))
	if p, r := slices.Index(types, "instance_paused"), slices.Index(types, "instance_resumed"); p < 0 || r < p {
		t.Errorf("g-3's history %v: want its pause, then its resume", types)
	}
}
