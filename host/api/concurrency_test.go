package api_test

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// chargeFlow lets one instance per customer run at once; each waits for
// its receipt, holding its slot.
const chargeFlow = `
name: charge
concurrency: { key: "${ input.c }", limit: 1 }
steps:
  - id: receipt
    wait: { event: charge.receipt, key: "${ input.n }", timeout: 1h }
`

// concurrencyKeys reads every page of GET /v1/concurrency with query.
func (h *host) concurrencyKeys(query string) []apiv1.ConcurrencyKey {
	h.t.Helper()
	var out []apiv1.ConcurrencyKey
	cursor := ""
	for {
		var p pageDoc[apiv1.ConcurrencyKey]
		h.do("GET", "/v1/concurrency?"+query+"&cursor="+url.QueryEscape(cursor), nil).want(h.t, http.StatusOK).json(h.t, &p)
		if p.Items == nil || p.NextCursor == nil {
			h.t.Fatalf("GET /v1/concurrency?%s: items %v, next_cursor %v: want both, never null", query, p.Items, p.NextCursor)
		}
		out = append(out, p.Items...)
		if *p.NextCursor == "" {
			return out
		}
		cursor = *p.NextCursor
	}
}

// awaitKey polls GET /v1/concurrency/{workflow}?key= until done says the
// key is as wanted, and fails the test after 30 seconds.
func (h *host) awaitKey(workflow, key, what string, done func(apiv1.ConcurrencyLine) bool) apiv1.ConcurrencyLine {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.do("GET", "/v1/concurrency/"+workflow+"?key="+url.QueryEscape(key), nil)
		var line apiv1.ConcurrencyLine
		if r.status == http.StatusOK {
			r.json(h.t, &line)
			if done(line) {
				return line
			}
		} else if r.status != http.StatusNotFound {
			h.t.Fatalf("GET /v1/concurrency/%s?key=%s: status %d: %s", workflow, key, r.status, r.body)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("concurrency key %q of %s: no %s after 30s (status %d, %s)", key, workflow, what, r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

// holderIDs are the instances that hold a key's slots.
func holderIDs(k apiv1.ConcurrencyKey) []string {
	var out []string
	for _, hd := range k.Holders {
		out = append(out, hd.InstanceID)
	}
	return out
}

// waiterIDs are the instances of a page of a key's line.
func waiterIDs(ws []apiv1.SlotWaiter) []string {
	var out []string
	for _, w := range ws {
		out = append(out, w.InstanceID)
	}
	return out
}

// TestConcurrencyRoutes: three instances of a workflow limited to one per
// key, started with one key: the first holds the slot while it waits for
// its event, the others wait in the key's line in the order they came.
// The list shows the key (running 1, waiting 2, its holder, its oldest
// wait) with its workflow's limit and policy, and so does the key's page,
// with the line in order, a page at a time; the instances show their key,
// and the waiters since when they wait. The holder's end hands the slot
// to the first in line. A key nobody holds or waits for is a 404, a name
// no workflow could have a 400 naming the parameter.
func TestConcurrencyRoutes(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("charge", chargeFlow)

	start := func(id string, wait bool) apiv1.Instance {
		t.Helper()
		path := "/v1/workflows/charge/instances"
		if wait {
			path += "?wait=30s&until=suspended"
		}
		var in apiv1.Instance
		h.do("POST", path, map[string]any{"id": id, "input": map[string]any{"c": "cus_42", "n": id}}).want(t, http.StatusCreated).json(t, &in)
		return in
	}
	// The first takes the slot and suspends at its wait, holding it.
	if in := start("charge-1", true); in.Status != "suspended" || in.Concurrency == nil || in.Concurrency.Key != "cus_42" || !in.Concurrency.WaitingSince.IsZero() {
		t.Fatalf("charge-1: status %s, concurrency %+v; want suspended holding key cus_42", in.Status, in.Concurrency)
	}
	// The others, one after the other, so that the line's order is theirs.
	start("charge-2", false)
	h.awaitKey("charge", "cus_42", "waiter", func(l apiv1.ConcurrencyLine) bool { return l.Key.Waiting == 1 })
	start("charge-3", false)
	line := h.awaitKey("charge", "cus_42", "second waiter", func(l apiv1.ConcurrencyLine) bool { return l.Key.Waiting == 2 })
	// A waiter is in the line from its create; its own record says since
	// when once its first run found no slot (markWaiting).
	for _, id := range []string{"charge-2", "charge-3"} {
		deadline := time.Now().Add(30 * time.Second)
		for {
			var in apiv1.Instance
			h.do("GET", "/v1/instances/"+id, nil).want(t, http.StatusOK).json(t, &in)
			if in.Concurrency != nil && !in.Concurrency.WaitingSince.IsZero() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no waiting since after 30s: %+v", id, in.Concurrency)
			}
			time.Sleep(20 * time.Millisecond) // polling, with a deadline
		}
	}

	// The list.
	keys := h.concurrencyKeys("")
	if len(keys) != 1 {
		t.Fatalf("GET /v1/concurrency lists %d keys, want 1: %+v", len(keys), keys)
	}
	k := keys[0]
	if k.Workflow != "charge" || k.Key != "cus_42" || k.Limit != 1 || k.Policy != apiv1.PolicyQueue ||
		k.Running != 1 || k.Cancelling != 0 || k.Waiting != 2 || !slices.Equal(holderIDs(k), []string{"charge-1"}) ||
		k.Holders[0].Since.IsZero() || k.OldestWait.IsZero() || k.OldestWait.Before(k.Holders[0].Since) {
		t.Errorf("the listed key is %+v; want charge's cus_42, limit 1, queue, running 1 (charge-1), waiting 2, with its times", k)
	}
	if keys := h.concurrencyKeys("workflow=charge&limit=1"); len(keys) != 1 || keys[0].Key != "cus_42" {
		t.Errorf("GET /v1/concurrency?workflow=charge lists %+v, want the key cus_42", keys)
	}
	if keys := h.concurrencyKeys("workflow=other"); len(keys) != 0 {
		t.Errorf("GET /v1/concurrency?workflow=other lists %+v, want none", keys)
	}

	// The key's page: the same key, and its line in order.
	if got := waiterIDs(line.Waiting); !slices.Equal(got, []string{"charge-2", "charge-3"}) || line.NextCursor != "" {
		t.Errorf("the line is %q (next cursor %q), want charge-2 then charge-3, one page", got, line.NextCursor)
	}
	if line.Key.Running != 1 || !slices.Equal(holderIDs(line.Key), []string{"charge-1"}) || !line.Key.OldestWait.Equal(line.Waiting[0].Since) ||
		line.Waiting[1].Since.Before(line.Waiting[0].Since) {
		t.Errorf("the key's page says %+v; want charge-1 holding, the oldest wait charge-2's", line)
	}
	// A page at a time.
	var first apiv1.ConcurrencyLine
	h.do("GET", "/v1/concurrency/charge?key=cus_42&limit=1", nil).want(t, http.StatusOK).json(t, &first)
	if got := waiterIDs(first.Waiting); !slices.Equal(got, []string{"charge-2"}) || first.NextCursor == "" {
		t.Fatalf("the line's first page of 1 is %q with next cursor %q, want charge-2 and a cursor", got, first.NextCursor)
	}
	var second apiv1.ConcurrencyLine
	h.do("GET", "/v1/concurrency/charge?key=cus_42&limit=1&cursor="+url.QueryEscape(first.NextCursor), nil).want(t, http.StatusOK).json(t, &second)
	if got := waiterIDs(second.Waiting); !slices.Equal(got, []string{"charge-3"}) {
		t.Errorf("the line's second page is %q, want charge-3", got)
	}

	// The instances: their key, and since when the waiters wait.
	for _, c := range []struct {
		id      string
		waiting bool
	}{{"charge-1", false}, {"charge-2", true}, {"charge-3", true}} {
		var in apiv1.Instance
		h.do("GET", "/v1/instances/"+c.id, nil).want(t, http.StatusOK).json(t, &in)
		if in.Concurrency == nil || in.Concurrency.Key != "cus_42" || in.Concurrency.WaitingSince.IsZero() != !c.waiting {
			t.Errorf("%s shows concurrency %+v; want key cus_42, waiting since a time: %v", c.id, in.Concurrency, c.waiting)
		}
		if c.waiting && in.Status != "pending" {
			t.Errorf("%s waits for a slot with status %s, want pending", c.id, in.Status)
		}
	}
	var list pageDoc[apiv1.Instance]
	h.do("GET", "/v1/instances?id=charge-3", nil).want(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 1 || list.Items[0].Concurrency == nil || list.Items[0].Concurrency.WaitingSince.IsZero() {
		t.Errorf("the list by id shows charge-3 as %+v, want it waiting for a slot", list.Items)
	}

	// charge-1's receipt ends it: its slot goes to charge-2, first in line.
	h.do("POST", "/v1/events", map[string]any{"name": "charge.receipt", "key": "charge-1"}).want(t, http.StatusAccepted)
	h.awaitStatus("charge-1", "completed")
	line = h.awaitKey("charge", "cus_42", "slot handed to charge-2", func(l apiv1.ConcurrencyLine) bool {
		return slices.Equal(holderIDs(l.Key), []string{"charge-2"})
	})
	if got := waiterIDs(line.Waiting); !slices.Equal(got, []string{"charge-3"}) || line.Key.Waiting != 1 {
		t.Errorf("after charge-1 ended the line is %q (waiting %d), want charge-3 alone", got, line.Key.Waiting)
	}
	h.awaitStatus("charge-2", "suspended")
	var two apiv1.Instance
	h.do("GET", "/v1/instances/charge-2", nil).want(t, http.StatusOK).json(t, &two)
	if two.Concurrency == nil || !two.Concurrency.WaitingSince.IsZero() {
		t.Errorf("charge-2 holds its slot and shows concurrency %+v, want no waiting_since", two.Concurrency)
	}

	// The errors.
	for _, c := range []struct {
		path   string
		status int
		field  string
		detail string
	}{
		{"/v1/concurrency/charge?key=cus_7", http.StatusNotFound, "", `nothing runs or waits under concurrency key "cus_7" of workflow "charge"`},
		{"/v1/concurrency/charge", http.StatusNotFound, "", `concurrency key "" of workflow "charge"`},
		{"/v1/concurrency/nope?key=cus_42", http.StatusNotFound, "", `of workflow "nope"`},
		{"/v1/concurrency/Not%20A%20Name", http.StatusBadRequest, "workflow", `workflow name "Not A Name"`},
		{"/v1/concurrency?workflow=Not.a.name", http.StatusBadRequest, "workflow", `workflow name "Not.a.name"`},
		{"/v1/concurrency?limit=0", http.StatusBadRequest, "limit", "must be an integer from 1 to"},
		{"/v1/concurrency/charge?key=cus_42&limit=1001", http.StatusBadRequest, "limit", "must be an integer from 1 to"},
		{"/v1/concurrency?cursor=%21%21", http.StatusBadRequest, "", "cursor"},
		{"/v1/concurrency/charge?key=cus_42&cursor=%21%21", http.StatusBadRequest, "", "cursor"},
	} {
		p := h.do("GET", c.path, nil).want(t, c.status).problem(t)
		if !strings.Contains(p.Detail, c.detail) {
			t.Errorf("GET %s: detail %q, want it to say %q", c.path, p.Detail, c.detail)
		}
		if c.field != "" && (len(p.Errors) != 1 || p.Errors[0].Path != c.field) {
			t.Errorf("GET %s: errors %+v, want one naming %s", c.path, p.Errors, c.field)
		}
	}
}

// TestConcurrencyReaders: a reader may list the keys and read one; no
// token is a 401.
func TestConcurrencyReaders(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.putWorkflow("charge", chargeFlow)
	h.do("POST", "/v1/workflows/charge/instances?wait=30s&until=suspended", map[string]any{"id": "c-1", "input": map[string]any{"c": "k", "n": "1"}}).want(t, http.StatusCreated)
	for _, path := range []string{"/v1/concurrency", "/v1/concurrency/charge?key=k"} {
		h.request("GET", path, readerSecret, "", nil).want(t, http.StatusOK)
		h.request("GET", path, "", "", nil).want(t, http.StatusUnauthorized).problem(t)
	}
	r := h.request("GET", "/v1/concurrency/charge?key=k", readerSecret, "", nil)
	var line apiv1.ConcurrencyLine
	r.json(t, &line)
	if line.Waiting == nil || fmt.Sprint(holderIDs(line.Key)) != "[c-1]" {
		t.Errorf("the key as a reader reads it: %+v, want c-1 holding and an empty line, not null", line)
	}
}

// syncFlow lets one attempt of its step run at once under the step key
// partner-api; each sleeps long enough to hold its slot while the test
// looks. Its instances' attempts that find the slot taken are deferred,
// in the key's line.
const syncFlow = `
name: sync
steps:
  - id: call
    activity: kit.sleep
    input: { ms: 600000 }
    timeout: 15m
    concurrency: { key: partner-api, limit: 1 }
`

// awaitStepKey polls GET /v1/step-concurrency?key= until done says the
// key is as wanted, and fails the test after 30 seconds.
func (h *host) awaitStepKey(key, what string, done func(apiv1.ConcurrencyLine) bool) apiv1.ConcurrencyLine {
	h.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		r := h.do("GET", "/v1/step-concurrency?key="+url.QueryEscape(key), nil)
		var line apiv1.ConcurrencyLine
		if r.status == http.StatusOK {
			r.json(h.t, &line)
			if done(line) {
				return line
			}
		} else if r.status != http.StatusNotFound {
			h.t.Fatalf("GET /v1/step-concurrency?key=%s: status %d: %s", key, r.status, r.body)
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("step concurrency key %q: no %s after 30s (status %d, %s)", key, what, r.status, r.body)
		}
		time.Sleep(20 * time.Millisecond) // polling, with a deadline
	}
}

// TestStepConcurrencyRoute: three instances whose activity step lets one
// attempt run at once per key, started one after the other: the first's
// attempt holds the slot (it sleeps), the others' wait in the key's line
// in the order they came, each shown as its instance. The key's page shows
// it as a step key (no workflow, policy queue) with its holder and its
// line, a page at a time, as the list does; a workflow's key of the same
// name is another key. A key nobody holds is a 404 naming it, no key a
// 400 naming the parameter; a reader may read it.
func TestStepConcurrencyRoute(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("sync", syncFlow)
	for i, id := range []string{"sync-1", "sync-2", "sync-3"} {
		h.do("POST", "/v1/workflows/sync/instances", map[string]any{"id": id}).want(t, http.StatusCreated)
		h.awaitStepKey("partner-api", "attempt of "+id, func(l apiv1.ConcurrencyLine) bool { return l.Key.Running == 1 && l.Key.Waiting == i })
	}

	var line apiv1.ConcurrencyLine
	h.request("GET", "/v1/step-concurrency?key=partner-api", readerSecret, "", nil).want(t, http.StatusOK).json(t, &line)
	k := line.Key
	if !k.Step || k.Workflow != "" || k.Key != "partner-api" || k.Limit != 1 || k.Policy != apiv1.PolicyQueue || k.Running != 1 || k.Waiting != 2 ||
		!slices.Equal(holderIDs(k), []string{"sync-1"}) || k.OldestWait.IsZero() || !k.OldestWait.Equal(line.Waiting[0].Since) {
		t.Errorf("the step key is %+v; want partner-api of the steps, limit 1, sync-1 holding, 2 waiting since the first's wait", k)
	}
	if got := waiterIDs(line.Waiting); !slices.Equal(got, []string{"sync-2", "sync-3"}) || line.NextCursor != "" {
		t.Errorf("the step key's line is %q (next cursor %q), want sync-2 then sync-3, one page", got, line.NextCursor)
	}
	// A page at a time.
	var first, second apiv1.ConcurrencyLine
	h.do("GET", "/v1/step-concurrency?key=partner-api&limit=1", nil).want(t, http.StatusOK).json(t, &first)
	if got := waiterIDs(first.Waiting); !slices.Equal(got, []string{"sync-2"}) || first.NextCursor == "" {
		t.Fatalf("the line's first page of 1 is %q with next cursor %q, want sync-2 and a cursor", got, first.NextCursor)
	}
	h.do("GET", "/v1/step-concurrency?key=partner-api&limit=1&cursor="+url.QueryEscape(first.NextCursor), nil).want(t, http.StatusOK).json(t, &second)
	if got := waiterIDs(second.Waiting); !slices.Equal(got, []string{"sync-3"}) {
		t.Errorf("the line's second page is %q, want sync-3", got)
	}
	// The list shows the same key, marked a step's.
	if keys := h.concurrencyKeys(""); len(keys) != 1 || !keys[0].Step || keys[0].Key != "partner-api" || keys[0].Waiting != 2 {
		t.Errorf("GET /v1/concurrency lists %+v, want the step key partner-api", keys)
	}

	for _, c := range []struct {
		path   string
		status int
		field  string
		detail string
	}{
		{"/v1/step-concurrency?key=nobody", http.StatusNotFound, "", `nothing runs or waits under step concurrency key "nobody"`},
		{"/v1/concurrency/sync?key=partner-api", http.StatusNotFound, "", `concurrency key "partner-api" of workflow "sync"`},
		{"/v1/step-concurrency", http.StatusBadRequest, "key", "required"},
		{"/v1/step-concurrency?key=", http.StatusBadRequest, "key", "required"},
		{"/v1/step-concurrency?key=partner-api&limit=0", http.StatusBadRequest, "limit", "must be an integer from 1 to"},
		{"/v1/step-concurrency?key=partner-api&cursor=%21%21", http.StatusBadRequest, "", "cursor"},
	} {
		p := h.do("GET", c.path, nil).want(t, c.status).problem(t)
		if !strings.Contains(p.Detail, c.detail) {
			t.Errorf("GET %s: detail %q, want it to say %q", c.path, p.Detail, c.detail)
		}
		if c.field != "" && (len(p.Errors) != 1 || p.Errors[0].Path != c.field) {
			t.Errorf("GET %s: errors %+v, want one naming %s", c.path, p.Errors, c.field)
		}
	}
	h.request("GET", "/v1/step-concurrency?key=partner-api", "", "", nil).want(t, http.StatusUnauthorized).problem(t)
}
