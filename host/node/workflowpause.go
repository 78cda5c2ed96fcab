package node

import (
	"context"
	"fmt"
	"math"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/batch"
)

// A paused workflow (docs/operations.md, "Pause a workflow") accepts its
// starts and holds them, pending, until it is resumed; its resume
// releases them, oldest first, through a batch job of the host's own (op
// release), which the node answers as it answers any batch (BatchView).

// MaxHeldCount bounds the pending instances HeldStarts reads to count a
// paused workflow's held starts: past it the count says "at least".
const MaxHeldCount = weft.MaxExamine

// PauseWorkflow pauses a workflow: from now on its starts (the API's, its
// triggers', its schedules', its parents') are created and held, pending,
// until it is resumed; its instances already started go on. op says who
// and why; its reason, which every held start's start_held entry copies,
// is at most batch.MaxReason bytes (an error matching weft.ErrInvalid
// otherwise). A pause of a paused workflow changes nothing and returns
// the first pause. The workflow need not be saved yet.
func (n *Node) PauseWorkflow(ctx context.Context, name string, op weft.Operation) (*weft.WorkflowPause, error) {
	if err := checkPauseReason(name, "pausing", op.Reason); err != nil {
		return nil, err
	}
	return n.engine.PauseWorkflow(ctx, name, op)
}

// ResumeWorkflow resumes a paused workflow and releases the starts it
// held, oldest first, at rate instances a second (nil: a batch's default,
// batch.DefaultRate; 0: as fast as the host goes), through a batch job
// whose progress shows the release. It returns the pause it removed and
// that batch. An error matching weft.ErrNotFound when the workflow is not
// paused, weft.ErrInvalid for a rate or a reason no batch takes (checked
// before anything changes). A release batch that cannot be started fails
// the resume, and the workflow stays paused.
func (n *Node) ResumeWorkflow(ctx context.Context, name string, op weft.Operation, rate *float64) (*weft.WorkflowPause, *BatchView, error) {
	if err := checkPauseReason(name, "resuming", op.Reason); err != nil {
		return nil, nil, err
	}
	r := batch.DefaultRate
	if rate != nil {
		r = *rate
	}
	if math.IsNaN(r) || math.IsInf(r, 0) || r < 0 {
		return nil, nil, fmt.Errorf("%w: resuming workflow %s: the rate %v is not a number of starts a second at least 0 (0: no limit)", weft.ErrInvalid, name, r)
	}
	p, b, err := n.engine.ResumeWorkflow(ctx, name, op, r)
	if err != nil {
		return nil, nil, err
	}
	v, err := batchView(b)
	if err != nil {
		return p, nil, err
	}
	return p, v, nil
}

// checkPauseReason refuses a reason longer than a batch's: a resume's is
// its release batch's, and a pause's is copied into every start it holds.
func checkPauseReason(name, doing, reason string) error {
	if len(reason) > batch.MaxReason {
		return fmt.Errorf("%w: %s workflow %s: the reason is %d bytes, more than %d", weft.ErrInvalid, doing, name, len(reason), batch.MaxReason)
	}
	return nil
}

// WorkflowPause returns the pause of the workflow name, or an error
// matching weft.ErrNotFound when it is not paused.
func (n *Node) WorkflowPause(ctx context.Context, name string) (*weft.WorkflowPause, error) {
	return n.store.GetWorkflowPause(ctx, name)
}

// WorkflowPauses returns the paused workflows, ordered by name; few, so
// in one list.
func (n *Node) WorkflowPauses(ctx context.Context) ([]weft.WorkflowPause, error) {
	return n.engine.WorkflowPauses(ctx)
}

// HeldStarts counts the held starts of a workflow: its pending instances
// with a hold. It reads at most MaxHeldCount of its pending instances,
// oldest first; more is true when it stopped there before the end, and
// the count is then a lower bound.
func (n *Node) HeldStarts(ctx context.Context, workflow string) (held int, more bool, err error) {
	return n.heldStarts(ctx, workflow, MaxHeldCount)
}

// heldStarts is HeldStarts reading at most limit pending instances.
func (n *Node) heldStarts(ctx context.Context, workflow string, limit int) (held int, more bool, err error) {
	examined := 0
	f := weft.InstanceFilter{Workflow: workflow, Status: weft.StatusPending, Limit: 1,
		// Counted as read, and none kept: the page stays empty.
		Match: func(in *weft.Instance) bool {
			examined++
			if in.Hold != nil {
				held++
			}
			return false
		}}
	for {
		f.Examine = limit - examined
		before := examined
		_, next, err := n.store.ListInstances(ctx, f)
		if err != nil {
			return 0, false, fmt.Errorf("node: counting the held starts of workflow %s: %w", workflow, err)
		}
		switch {
		case next == "":
			return held, false, nil
		case examined >= limit, examined == before:
			// The bound, or a page that read nothing: stop rather
			// than loop.
			return held, true, nil
		}
		f.Cursor = next
	}
}
