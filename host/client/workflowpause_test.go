package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/weftworks/weft/host/api/apiv1"
	"github.com/weftworks/weft/host/client"
)

// TestClientWorkflowPause: PauseWorkflow pauses a workflow, which
// Workflow, Workflows and WorkflowPauses then show; a start is held, with
// its Hold. ResumeWorkflow answers the pause and the release batch, which
// releases the start, and it completes. A resume of a workflow not paused
// is not found.
func TestClientWorkflowPause(t *testing.T) {
	t.Parallel()
	c := newClient(t, startHost(t), adminToken)
	ctx := context.Background()
	src := []byte("name: quick\nsteps:\n  - id: a\n    set: { n: \"${ input.n }\" }\noutput: \"${ vars.n }\"\n")
	if _, _, err := c.PutWorkflow(ctx, "quick", src); err != nil {
		t.Fatal(err)
	}
	p, err := c.PauseWorkflow(ctx, "quick", "maintenance")
	if err != nil || p.Workflow != "quick" || p.Actor != "ci" || p.Reason != "maintenance" {
		t.Fatalf("PauseWorkflow: %+v, %v; want ci's pause", p, err)
	}
	if w, err := c.Workflow(ctx, "quick", 0); err != nil || w.Paused == nil || w.Paused.Held == nil || *w.Paused.Held != 0 {
		t.Fatalf("Workflow of the paused workflow: %+v, %v; want its pause holding 0", w, err)
	}
	if page, err := c.Workflows(ctx, client.ListOptions{}); err != nil || len(page.Items) != 1 || page.Items[0].Paused == nil {
		t.Fatalf("Workflows: %+v, %v; want quick paused", page, err)
	}
	if ps, err := c.WorkflowPauses(ctx); err != nil || len(ps) != 1 || ps[0].Reason != "maintenance" {
		t.Fatalf("WorkflowPauses: %+v, %v", ps, err)
	}
	in, _, err := c.Start(ctx, "quick", apiv1.StartRequest{ID: "q-1", Input: json.RawMessage(`{"n": 7}`)}, 0)
	if err != nil || in.Status != apiv1.StatusPending || in.Hold == nil {
		t.Fatalf("Start of the paused workflow: %+v, %v; want it pending and held", in, err)
	}
	rate := 0.0
	res, err := c.ResumeWorkflow(ctx, "quick", apiv1.WorkflowResumeRequest{Reason: "done", Rate: &rate})
	if err != nil || res.Pause.Reason != "maintenance" || res.Release == nil || res.Release.Op != apiv1.BatchRelease || res.Release.Reason != "done" {
		t.Fatalf("ResumeWorkflow: %+v, %v; want the pause and its release", res, err)
	}
	if b := awaitBatch(t, c, res.Release.ID, func(b *apiv1.Batch) bool { return b.Phase.Finished() }); b.Counts[apiv1.ItemDone] != 1 {
		t.Errorf("the release ended %s with %v, want q-1 released", b.Phase, b.Counts)
	}
	if in, err := c.Await(ctx, "q-1", time.Minute, apiv1.UntilEnded); err != nil || in.Status != apiv1.StatusCompleted || string(in.Output) != "7" || in.Hold != nil {
		t.Fatalf("q-1 after the resume: %+v, %v; want it completed", in, err)
	}
	if _, err := c.ResumeWorkflow(ctx, "quick", apiv1.WorkflowResumeRequest{}); !errors.Is(err, client.ErrNotFound) {
		t.Errorf("ResumeWorkflow of a workflow not paused: %v, want ErrNotFound", err)
	}
}
