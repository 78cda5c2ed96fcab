package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Pause pauses an instance (runner.Pause): a message in its inbox, applied
// when it runs next, at once when it runs on this node. It begins no step
// from then on; an attempt in flight completes and is recorded; the timers
// and events that come meanwhile are held, and applied when it is resumed.
// Its status is paused once nothing is in flight (docs/operations.md,
// "Pause and resume").
//
// op says who asks and why, and when (now, when op.At is zero); the
// instance_paused entry records it. A pause of a paused instance writes
// nothing, unless a resume is on its way in its inbox: then the pause
// follows it, and the instance ends paused. It returns the instance as it was before the pause applied; an
// error matching weft.ErrNotFound for no such instance and a
// *weft.FinishedError for one that has finished.
func (e *Engine) Pause(ctx context.Context, id string, op weft.Operation) (*weft.Instance, error) {
	return e.pauseOrResume(ctx, id, weft.MessagePause, op)
}

// Resume resumes a paused instance (runner.Resume), as Pause pauses it: the
// attempts lost while it was paused run again, the held timers and events
// are applied in the order they came, and it goes on. The instance_resumed
// entry records op. It returns the instance as it was before the resume
// applied; an error matching weft.ErrNotPaused for an instance that is not
// paused and has no pause on its way, weft.ErrNotFound for no such
// instance, and a *weft.FinishedError for one that has finished.
func (e *Engine) Resume(ctx context.Context, id string, op weft.Operation) (*weft.Instance, error) {
	return e.pauseOrResume(ctx, id, weft.MessageResume, op)
}

func (e *Engine) pauseOrResume(ctx context.Context, id string, kind weft.MessageKind, op weft.Operation) (*weft.Instance, error) {
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	if inst.Status.Terminal() {
		return nil, &weft.FinishedError{ID: id, Status: inst.Status}
	}
	p, _, err := pauseOf(inst)
	if err != nil {
		return nil, err
	}
	// What the instance's record says may be undone by a message on its
	// way: a paused instance with a resume in its inbox is to be paused
	// again (a pause, a resume and a pause sent before it runs), and a
	// running one with a pause in its inbox may be resumed.
	pending := func(want weft.MessageKind) (bool, error) {
		msgs, err := e.store.Inbox(ctx, id)
		if err != nil {
			return false, err
		}
		return slices.ContainsFunc(msgs, func(m weft.Message) bool { return m.Kind == want }), nil
	}
	switch {
	case kind == weft.MessagePause && p != nil:
		resuming, err := pending(weft.MessageResume)
		if err != nil {
			return nil, err
		}
		if !resuming {
			return inst, nil // paused already: its pause says who paused it
		}
	case kind == weft.MessageResume && p == nil:
		pausing, err := pending(weft.MessagePause)
		if err != nil {
			return nil, err
		}
		if !pausing {
			return nil, fmt.Errorf("engine: instance %s is %s: %w", id, inst.Status, weft.ErrNotPaused)
		}
	}
	if op.At.IsZero() {
		op.At = e.cfg.Now()
	}
	msg := pauseMessage(id, kind, op, e.cfg.Now())
	if _, err := e.store.Deliver(ctx, nil, []weft.Message{msg}); err != nil {
		return nil, err
	}
	e.notify(ctx, itemOf(id, string(kind), inst.Order))
	return inst, nil
}

// pauseMessage is the message of a pause or a resume (kind) of instance
// id, with op. Each has an id of its own: a pause, a resume and a pause
// again, all sent before the instance runs, all apply, in order.
func pauseMessage(id string, kind weft.MessageKind, op weft.Operation, now time.Time) weft.Message {
	return weft.Message{InstanceID: id, ID: string(kind) + ":" + opID(op, now), Kind: kind, Op: &op}
}

// opID names the message of an operator's action: the batch's id for an
// item of a batch, so that the batch's item, applied once, writes one
// message however often its chunk is tried; a new id otherwise.
func opID(op weft.Operation, now time.Time) string {
	if op.Batch != "" {
		return op.Batch
	}
	return newID(now)
}

// Paused returns the pause of a paused instance, with the number of
// timers' fires and events it holds for its resume; nil for an instance
// that is not paused. An instance with an attempt in flight may be paused
// and still running: its status is paused once the attempt ended.
func (e *Engine) Paused(inst *weft.Instance) (*weft.Pause, int, error) {
	return pauseOf(inst)
}

// pauseOf reads the pause out of inst's state, without the rest of it.
func pauseOf(inst *weft.Instance) (*weft.Pause, int, error) {
	if len(inst.State) == 0 {
		return nil, 0, nil
	}
	var st struct {
		Paused *weft.Pause       `json:"paused"`
		Held   []json.RawMessage `json:"held"`
	}
	if err := json.Unmarshal(inst.State, &st); err != nil {
		return nil, 0, fmt.Errorf("engine: instance %s: state does not decode: %w", inst.ID, err)
	}
	return st.Paused, len(st.Held), nil
}
