package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
)

// batch reads a batch.
func (h *host) batch(id string) apiv1.Batch {
	h.t.Helper()
	var b apiv1.Batch
	h.do("GET", "/v1/batches/"+id, nil).want(h.t, http.StatusOK).json(h.t, &b)
	return b
}

// awaitBatch polls a batch until done says so, up to a minute.
func (h *host) awaitBatch(id, what string, done func(apiv1.Batch) bool) apiv1.Batch {
	h.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		b := h.batch(id)
		if done(b) {
			return b
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("batch %s: not %s after a minute: %+v", id, what, b)
		}
		time.Sleep(10 * time.Millisecond) // polling with a deadline
	}
}

// startBatch starts a batch as the token, and returns the answer.
func (h *host) startBatch(token string, doc any) response {
	h.t.Helper()
	b, err := json.Marshal(doc)
	if err != nil {
		h.t.Fatal(err)
	}
	return h.request("POST", "/v1/batches", token, "application/json", b)
}

// TestBatchCancelByQueryWithHold: a batch of a query started with hold
// selects the matching instances and waits, with their count; confirmed,
// it cancels each, recording the batch and its actor in each instance's
// history; its items list each with its outcome, a page at a time; a
// second confirm is a conflict, and a cancel of the finished batch
// answers it as it is.
func TestBatchCancelByQueryWithHold(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	h.pushKit()
	h.putWorkflow("approval", approvalFlow)
	for i := range 3 {
		h.do("POST", "/v1/workflows/approval/instances?wait=30s&until=suspended", map[string]any{"id": fmt.Sprintf("ap-%d", i), "input": map[string]any{"id": i}}).want(t, http.StatusCreated)
	}
	var b apiv1.Batch
	h.startBatch(operatorSecret, map[string]any{"op": "cancel", "query": `workflow = "approval"`, "reason": "wrong approvals", "hold": true, "rate": 0}).
		want(t, http.StatusCreated).json(t, &b)
	if !strings.HasPrefix(b.ID, "b-") || b.Op != apiv1.BatchCancel || b.Actor != "ops" || b.Reason != "wrong approvals" || !b.Hold || b.Rate != 0 || b.Query != `workflow = "approval"` || b.IDs != 0 {
		t.Fatalf("started batch %+v", b)
	}
	if len(b.Counts) != 6 {
		t.Errorf("counts %v, want every outcome", b.Counts)
	}
	b = h.awaitBatch(b.ID, "selected", func(b apiv1.Batch) bool { return b.Phase == apiv1.PhaseSelected })
	if b.Matched != 3 || b.Counts[apiv1.ItemPending] != 3 || !b.NextStepAt.IsZero() {
		t.Fatalf("selected batch: matched %d, counts %v, next step %s; want 3 pending, waiting for nothing but a confirmation", b.Matched, b.Counts, b.NextStepAt)
	}
	h.do("POST", "/v1/batches/"+b.ID+"/confirm", nil).want(t, http.StatusOK)
	b = h.awaitBatch(b.ID, "done", func(b apiv1.Batch) bool { return b.Phase == apiv1.PhaseDone })
	if b.Counts[apiv1.ItemDone] != 3 || b.Counts[apiv1.ItemPending] != 0 || b.FinishedAt.IsZero() {
		t.Fatalf("done batch: %+v", b)
	}
	for i := range 3 {
		id := fmt.Sprintf("ap-%d", i)
		h.awaitStatus(id, "cancelled")
		e := h.awaitEntry(id, "instance_cancelled")
		var data struct{ Reason, Batch string }
		if err := json.Unmarshal(e.Data, &data); err != nil || e.Actor != "ops" || data.Reason != "wrong approvals" || data.Batch != b.ID {
			t.Errorf("%s: instance_cancelled by %q with %s, want ops's, with the batch", id, e.Actor, e.Data)
		}
	}

	// The items, two to a page, in the order they were selected.
	var page apiv1.Page[apiv1.BatchItem]
	h.do("GET", "/v1/batches/"+b.ID+"/items?outcome=done&limit=2", nil).want(t, http.StatusOK).json(t, &page)
	if len(page.Items) != 2 || page.Items[0].Seq != 1 || page.Items[0].Outcome != apiv1.ItemDone || page.NextCursor != "2" {
		t.Fatalf("first page of items: %+v", page)
	}
	h.do("GET", "/v1/batches/"+b.ID+"/items?after="+page.NextCursor, nil).want(t, http.StatusOK).json(t, &page)
	if len(page.Items) != 1 || page.Items[0].Seq != 3 || page.NextCursor != "" {
		t.Fatalf("second page of items: %+v", page)
	}
	var ids []string
	h.do("GET", "/v1/batches/"+b.ID+"/items", nil).want(t, http.StatusOK).json(t, &page)
	for _, it := range page.Items {
		ids = append(ids, it.InstanceID)
	}
	if slices.Sort(ids); !slices.Equal(ids, []string{"ap-0", "ap-1", "ap-2"}) {
		t.Errorf("items %v, want the three instances", ids)
	}

	// The list has it; a second confirm is refused; a cancel of a
	// finished batch answers it as it is.
	var list apiv1.Page[apiv1.Batch]
	h.request("GET", "/v1/batches", readerSecret, "", nil).want(t, http.StatusOK).json(t, &list)
	if len(list.Items) != 1 || list.Items[0].ID != b.ID {
		t.Errorf("list: %+v", list)
	}
	if p := h.do("POST", "/v1/batches/"+b.ID+"/confirm", nil).want(t, http.StatusConflict).problem(t); !strings.Contains(p.Detail, "is done") {
		t.Errorf("second confirm: %s", p.Detail)
	}
	var cancelled apiv1.Batch
	h.do("POST", "/v1/batches/"+b.ID+"/cancel", nil).want(t, http.StatusOK).json(t, &cancelled)
	if cancelled.Phase != apiv1.PhaseDone || cancelled.Cancelled != nil {
		t.Errorf("cancel of a done batch: %+v", cancelled)
	}
}

// TestBatchCancelStopsIt: a held batch of listed ids cancelled before its
// confirmation applies nothing; the answer says who cancelled it and why.
func TestBatchCancelStopsIt(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	var b apiv1.Batch
	h.startBatch(operatorSecret, map[string]any{"op": "pause", "ids": []string{"x-1", "x-2"}, "hold": true}).want(t, http.StatusCreated).json(t, &b)
	if b.Phase != apiv1.PhaseSelected || b.IDs != 2 || b.Matched != 2 || b.Query != "" {
		t.Fatalf("a held batch of ids: %+v", b)
	}
	h.request("POST", "/v1/batches/"+b.ID+"/cancel", operatorSecret, "application/json", []byte(`{"reason":"not now"}`)).want(t, http.StatusOK).json(t, &b)
	if b.Phase != apiv1.PhaseCancelled || b.Cancelled == nil || b.Cancelled.Actor != "ops" || b.Cancelled.Reason != "not now" || b.Cancelled.At.IsZero() || b.Counts[apiv1.ItemPending] != 2 {
		t.Fatalf("cancelled batch: %+v (cancelled %+v)", b, b.Cancelled)
	}
	if p := h.do("POST", "/v1/batches/"+b.ID+"/confirm", nil).want(t, http.StatusConflict).problem(t); !strings.Contains(p.Detail, "cancelled") {
		t.Errorf("confirm of a cancelled batch: %s", p.Detail)
	}
}

// TestBatchDocumentProblems: a batch document's problems are answered
// together, each with its path, as a definition's are (422).
func TestBatchDocumentProblems(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	for _, tc := range []struct {
		name, body string
		paths      []string
	}{
		{"signal without its event, an arg of reset, an id twice", `{"op":"signal","ids":["a","a"],"args":{"step":"x"}}`, []string{"ids[1]", "args.step", "args.event"}},
		{"a query that does not parse", `{"op":"cancel","query":"status = "}`, []string{"query"}},
		{"an unknown attribute", `{"op":"cancel","query":"nosuch = 1"}`, []string{"query"}},
		{"the host's own operation", `{"op":"release","ids":["a"]}`, []string{"op"}},
		{"both a query and ids, an unknown field", `{"op":"cancel","query":"status = \"failed\"","ids":["a"],"sped":2}`, []string{"", "sped"}},
		{"empty", ``, []string{""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := h.request("POST", "/v1/batches", adminSecret, "application/json", []byte(tc.body)).want(t, http.StatusUnprocessableEntity).problem(t)
			if p.Type != "urn:weft:problem:validation" {
				t.Errorf("type %s", p.Type)
			}
			var paths []string
			for _, e := range p.Errors {
				paths = append(paths, e.Path)
			}
			for _, want := range tc.paths {
				if !slices.Contains(paths, want) {
					t.Errorf("problems %+v lack one at %q", p.Errors, want)
				}
			}
		})
	}
	h.request("POST", "/v1/batches", adminSecret, "text/plain", []byte(`{}`)).want(t, http.StatusUnsupportedMediaType)
}

// TestBatchRoles: an operator starts a cancel batch but not a delete or a
// migrate, nor confirms an admin's held migrate; a reader starts none.
// Nothing is applied by the refused requests.
func TestBatchRoles(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	for _, op := range []string{"delete", "migrate"} {
		p := h.startBatch(operatorSecret, map[string]any{"op": op, "ids": []string{"a"}}).want(t, http.StatusForbidden).problem(t)
		if !strings.Contains(p.Detail, `token "ops" has role operator; a batch that applies `+op+" needs admin") {
			t.Errorf("%s by an operator: %s", op, p.Detail)
		}
	}
	h.startBatch(readerSecret, map[string]any{"op": "cancel", "ids": []string{"a"}}).want(t, http.StatusForbidden)
	h.startBatch(operatorSecret, map[string]any{"op": "cancel", "ids": []string{"a"}, "hold": true}).want(t, http.StatusCreated)

	var b apiv1.Batch
	h.startBatch(adminSecret, map[string]any{"op": "migrate", "ids": []string{"a"}, "dry_run": true, "hold": true, "args": map[string]any{"to_version": 2}}).
		want(t, http.StatusCreated).json(t, &b)
	if b.Args == nil || b.Args.ToVersion != 2 || !b.DryRun || b.Actor != "ci" {
		t.Fatalf("migrate batch: %+v (args %+v)", b, b.Args)
	}
	p := h.request("POST", "/v1/batches/"+b.ID+"/confirm", operatorSecret, "", nil).want(t, http.StatusForbidden).problem(t)
	if !strings.Contains(p.Detail, "confirming a batch that applies migrate needs admin") {
		t.Errorf("an operator's confirm of a migrate: %s", p.Detail)
	}
	if b = h.batch(b.ID); b.Phase != apiv1.PhaseSelected {
		t.Errorf("after the refused confirm the batch is %s", b.Phase)
	}
	h.do("POST", "/v1/batches/"+b.ID+"/confirm", nil).want(t, http.StatusOK)
	b = h.awaitBatch(b.ID, "done", func(b apiv1.Batch) bool { return b.Phase == apiv1.PhaseDone })
	var items apiv1.Page[apiv1.BatchItem]
	h.do("GET", "/v1/batches/"+b.ID+"/items", nil).want(t, http.StatusOK).json(t, &items)
	if len(items.Items) != 1 || items.Items[0].Outcome != apiv1.ItemSkipped || items.Items[0].Reason != "not found" {
		t.Errorf("the dry run's item of no instance: %+v", items.Items)
	}
}

// TestBatchNotFound: a batch that does not exist is a 404 on every route
// that names it; a bad outcome or id is a 400 naming it.
func TestBatchNotFound(t *testing.T) {
	t.Parallel()
	h := newHost(t)
	for _, r := range []struct{ method, path string }{
		{"GET", "/v1/batches/b-nope"},
		{"GET", "/v1/batches/b-nope/items"},
		{"POST", "/v1/batches/b-nope/confirm"},
		{"POST", "/v1/batches/b-nope/cancel"},
	} {
		if p := h.do(r.method, r.path, nil).want(t, http.StatusNotFound).problem(t); p.Detail != `no batch "b-nope"` {
			t.Errorf("%s %s: %s", r.method, r.path, p.Detail)
		}
	}
	if p := h.do("GET", "/v1/batches/b-nope/items?outcome=maybe", nil).want(t, http.StatusBadRequest).problem(t); len(p.Errors) != 1 || p.Errors[0].Path != "outcome" {
		t.Errorf("a bad outcome: %+v", p)
	}
	if p := h.do("GET", "/v1/batches/"+strings.Repeat("b", 300), nil).want(t, http.StatusBadRequest).problem(t); len(p.Errors) != 1 || p.Errors[0].Path != "id" {
		t.Errorf("a bad id: %+v", p)
	}
}
