package node_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/weft"
)

// TestWorkflowPauseThroughTheNode: a paused workflow's starts are held,
// and HeldStarts counts them, saying when it stopped at its bound; a
// reason longer than a batch's, and a rate no batch takes, are refused
// before anything changes; the resume answers the release batch as a
// BatchView.
func TestWorkflowPauseThroughTheNode(t *testing.T) {
	t.Parallel()
	n, _, _ := open(t, config(t.TempDir()))
	ctx := context.Background()
	if _, _, err := n.SaveDefinition(ctx, []byte("name: quick\nsteps:\n  - { id: a, set: { n: 1 } }\n")); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("x", 1025)
	if _, err := n.PauseWorkflow(ctx, "quick", weft.Operation{Actor: "alice", Reason: long}); !errors.Is(err, weft.ErrInvalid) {
		t.Fatalf("a pause with a reason of 1025 bytes: %v, want ErrInvalid", err)
	}
	if _, err := n.WorkflowPause(ctx, "quick"); !errors.Is(err, weft.ErrNotFound) {
		t.Fatalf("after a refused pause: %v, want no pause", err)
	}
	if _, err := n.PauseWorkflow(ctx, "quick", weft.Operation{Actor: "alice", Reason: "hold on"}); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		inst, _, err := n.Start(ctx, "quick", nil, "")
		if err != nil || inst.Hold == nil {
			t.Fatalf("a start of the paused workflow: %+v, %v; want it held", inst, err)
		}
	}
	for _, c := range []struct {
		limit    int
		held     int
		moreThan bool
	}{
		{limit: 100, held: 5},
		{limit: 3, held: 3, moreThan: true},
	} {
		held, more, err := n.HeldStartsUpTo(ctx, "quick", c.limit)
		if err != nil || held != c.held || more != c.moreThan {
			t.Errorf("held starts read up to %d: %d, more %v, %v; want %d, more %v", c.limit, held, more, err, c.held, c.moreThan)
		}
	}
	if held, more, err := n.HeldStarts(ctx, "quick"); err != nil || held != 5 || more {
		t.Errorf("HeldStarts: %d, more %v, %v; want 5", held, more, err)
	}
	for _, rate := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, _, err := n.ResumeWorkflow(ctx, "quick", weft.Operation{Actor: "alice"}, &rate); !errors.Is(err, weft.ErrInvalid) {
			t.Errorf("a resume at rate %v: %v, want ErrInvalid", rate, err)
		}
	}
	if _, _, err := n.ResumeWorkflow(ctx, "quick", weft.Operation{Actor: "alice", Reason: long}, nil); !errors.Is(err, weft.ErrInvalid) {
		t.Errorf("a resume with a reason of 1025 bytes: %v, want ErrInvalid", err)
	}
	if ps, err := n.WorkflowPauses(ctx); err != nil || len(ps) != 1 || ps[0].Op.Reason != "hold on" {
		t.Fatalf("after refused resumes: %+v, %v; want the pause still", ps, err)
	}
	p, b, err := n.ResumeWorkflow(ctx, "quick", weft.Operation{Actor: "alice", Reason: "go"}, nil)
	if err != nil || p.Op.Reason != "hold on" || b == nil || b.Op != weft.BatchRelease || b.Reason != "go" || b.Rate != 1000 || b.Actor != "alice" {
		t.Fatalf("ResumeWorkflow: %+v, %+v, %v; want the pause and a release batch by alice at the default rate", p, b, err)
	}
}
