package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/batch"
	"github.com/weftworks/weft/internal/store"
)

// A paused workflow (docs/operations.md, "Pause a workflow") accepts its
// starts — the API's, its triggers', its schedules', its parents' — and
// holds them: each instance is created pending with weft.Instance.Hold,
// and not queued. Its resume releases them, oldest first, through a
// batch job of the host's own (op release), which queues each; an
// instance's run then finds its workflow no longer paused, clears its
// hold and starts. The recovery sweep queues a held instance whose
// workflow is not paused: a start that read "paused" and committed after
// the release went past it.

// PauseWorkflow pauses a workflow: its new instances are created and held
// until it is resumed. Instances already running go on (pause them with a
// batch). op says who and why. A pause of a paused workflow changes
// nothing and returns the first pause. The workflow need not be saved yet.
func (e *Engine) PauseWorkflow(ctx context.Context, name string, op weft.Operation) (*weft.WorkflowPause, error) {
	if op.At.IsZero() {
		op.At = e.cfg.Now()
	}
	p, err := e.store.PauseWorkflow(ctx, weft.WorkflowPause{Workflow: name, Op: op})
	if err != nil {
		return nil, fmt.Errorf("engine: pausing workflow %s: %w", name, err)
	}
	e.log.Info("workflow paused", "workflow", name, "actor", op.Actor, "reason", op.Reason)
	return p, nil
}

// ResumeWorkflow resumes a paused workflow and releases the starts it
// held, oldest first, at rate per second (0: as fast as the host goes),
// through a batch job whose progress shows the release; it returns the
// pause removed and that batch (nil when nothing was held). An error
// matching weft.ErrNotFound when the workflow is not paused.
func (e *Engine) ResumeWorkflow(ctx context.Context, name string, op weft.Operation, rate float64) (*weft.WorkflowPause, *weft.Batch, error) {
	if op.At.IsZero() {
		op.At = e.cfg.Now()
	}
	if _, err := e.store.GetWorkflowPause(ctx, name); err != nil {
		return nil, nil, fmt.Errorf("engine: resuming workflow %s: %w", name, err)
	}
	// The release first, then the resume: the recovery sweep, which
	// queues a held start whose workflow is not paused, leaves those a
	// release batch is releasing, and so finds this one as soon as the
	// workflow is resumed; the batch applies nothing until then.
	doc, err := json.Marshal(map[string]any{"op": weft.BatchRelease, "query": releaseQuery(name), "reason": op.Reason, "rate": rate})
	if err != nil {
		return nil, nil, err
	}
	b, err := e.startBatch(ctx, doc, op.Actor)
	if err != nil {
		return nil, nil, fmt.Errorf("engine: the release of the starts workflow %s held: %w", name, err)
	}
	p, err := e.store.UnpauseWorkflow(ctx, name)
	if err != nil {
		stop := weft.Operation{Actor: weft.ActorEngine, Reason: "the resume of workflow " + name + " failed"}
		if _, cerr := e.CancelBatch(context.WithoutCancel(ctx), b.ID, stop); cerr != nil {
			e.log.Warn("cancelling the release of a workflow that was not resumed", "workflow", name, "batch", b.ID, "err", cerr)
		}
		return nil, nil, fmt.Errorf("engine: resuming workflow %s: %w", name, err)
	}
	e.log.Info("workflow resumed", "workflow", name, "actor", op.Actor, "reason", op.Reason, "release", b.ID)
	return p, b, nil
}

// errStillPaused: a release batch met a start whose workflow is still
// paused (its resume has not landed yet); it waits for it.
var errStillPaused = errors.New("the workflow is still paused")

// releaseQuery selects the held starts of workflow name.
func releaseQuery(name string) string {
	return "workflow = " + strconv.Quote(name) + ` AND status = "pending"`
}

// releasing returns those of workflows whose held starts a release batch
// is still releasing: the recovery sweep leaves them to it, so that its
// rate and its order hold. It reads the newest batches, where a release
// started by a recent resume is.
func (e *Engine) releasing(ctx context.Context, workflows map[string]bool) (map[string]bool, error) {
	queries := map[string]string{} // a release batch's query, canonical → workflow
	for name := range workflows {
		doc, err := json.Marshal(map[string]any{"op": weft.BatchRelease, "query": releaseQuery(name)})
		if err != nil {
			return nil, err
		}
		d, err := batch.ParseDocument(doc)
		if err != nil {
			return nil, err
		}
		queries[d.Query] = name
	}
	bs, _, err := e.store.ListBatches(ctx, "", releaseLookback)
	if err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, b := range bs {
		d, err := batch.ParseDocument(b.Document)
		if err != nil || d.Op != weft.BatchRelease {
			continue
		}
		st, err := batch.ParseState(b.State)
		if err != nil || st.Phase.Finished() {
			continue
		}
		if name, ok := queries[d.Query]; ok {
			out[name] = true
		}
	}
	return out, nil
}

// releaseLookback is how many of the newest batches releasing reads.
const releaseLookback = 100

// WorkflowPauses returns the paused workflows.
func (e *Engine) WorkflowPauses(ctx context.Context) ([]weft.WorkflowPause, error) {
	return e.store.WorkflowPauses(ctx)
}

// release decides whether a held instance starts now: when its workflow
// is still paused it does not (false), and otherwise its hold is cleared
// and start_released recorded, in a commit of its own, and it goes on to
// its admission like any pending instance.
func (x *execution) release() (bool, error) {
	_, err := x.e.store.GetWorkflowPause(x.ctx, x.inst.Workflow)
	switch {
	case err == nil:
		return false, nil
	case !errors.Is(err, weft.ErrNotFound):
		return false, fmt.Errorf("instance %s: reading the pause of workflow %s: %w", x.inst.ID, x.inst.Workflow, err)
	}
	now := x.e.cfg.Now()
	inst := x.inst
	held := inst.Hold
	inst.Hold = nil
	data, err := json.Marshal(map[string]any{"held_ms": now.Sub(held.Since).Milliseconds()})
	if err != nil {
		return false, err
	}
	c := store.Commit{Instance: inst, Fence: x.lease.Token(), At: now.UTC(),
		History: []weft.HistoryEntry{{Type: weft.HistoryStartReleased, Time: now, Node: x.e.cfg.NodeID, Data: data}}}
	rev, err := x.e.store.Commit(x.ctx, c)
	if err != nil {
		inst.Hold = held
		return false, fmt.Errorf("instance %s: releasing its held start: %w", inst.ID, err)
	}
	inst.Rev, inst.Fence, inst.UpdatedAt = rev, c.Fence, c.At
	x.e.changed(inst.ID)
	return true, nil
}

// releaseChange is a release batch's change for a held instance: none is
// sent; the batch queues it, and its run releases it.
func releaseChange(c weft.BatchChange, inst *weft.Instance) weft.BatchChange {
	if inst.Hold == nil {
		c.Outcome, c.Reason = weft.BatchSkipped, "not held"
	}
	return c
}

// isRelease reports whether d is a release batch's.
func isRelease(d *batch.Document) bool { return d.Op == weft.BatchRelease }
