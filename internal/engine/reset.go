package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/runner"
)

// resetRequest is the payload of a reset message: the step, and the
// variables it began with, as its step_started entries recorded them.
type resetRequest struct {
	Step string         `json:"step"`
	Vars map[string]any `json:"vars"`
}

// historyPage is how many history entries a reset reads at a time.
const historyPage = 1000

// ResetPoints returns the top-level steps an instance began, each at its
// last beginning, in the order of the definition, with whether the
// variables it began with were recorded (Config.VarsLimit): the steps it
// can be reset to. ErrNotFound for no such instance.
func (e *Engine) ResetPoints(ctx context.Context, id string) ([]weft.ResetPoint, error) {
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	prog, err := e.program(ctx, inst.Workflow, inst.Version)
	if err != nil {
		return nil, err
	}
	points, _, err := e.resetPoints(ctx, inst, prog)
	if err != nil {
		return nil, err
	}
	out := make([]weft.ResetPoint, 0, len(points))
	for i, s := range prog.Definition().Steps {
		if p, ok := points[s.ID]; ok {
			p.Index = i
			out = append(out, p)
		}
	}
	return out, nil
}

// resetPoints reads inst's history for the last beginning of each
// top-level step, and the variables each began with.
func (e *Engine) resetPoints(ctx context.Context, inst *weft.Instance, prog *runner.Program) (map[string]weft.ResetPoint, map[string]map[string]any, error) {
	top := map[string]bool{}
	for _, s := range prog.Definition().Steps {
		top[s.ID] = true
	}
	points := map[string]weft.ResetPoint{}
	vars := map[string]map[string]any{}
	// The variables as of the entry read last: the latest copy, nil
	// before the first (a history that predates the copies).
	var current map[string]any
	omitted := ""
	for after := uint64(0); ; {
		evs, err := e.store.History(ctx, inst.ID, after, historyPage)
		if err != nil {
			return nil, nil, err
		}
		for _, ev := range evs {
			after = ev.Seq
			if ev.Type != weft.HistoryInstanceStarted && (ev.Type != weft.HistoryStepStarted || !topLevel(ev.StepPath)) {
				continue
			}
			var d struct {
				Step    string          `json:"step"`
				Vars    json.RawMessage `json:"vars"`
				Changed json.RawMessage `json:"vars_changed"`
				Omitted int             `json:"vars_omitted_bytes"`
				Error   string          `json:"vars_error"`
			}
			if len(ev.Data) > 0 {
				if err := json.Unmarshal(ev.Data, &d); err != nil {
					return nil, nil, fmt.Errorf("engine: instance %s: history entry %d: %w", inst.ID, ev.Seq, err)
				}
			}
			switch {
			case len(d.Vars) > 0:
				current, omitted = nil, ""
				if err := json.Unmarshal(d.Vars, &current); err != nil {
					return nil, nil, fmt.Errorf("engine: instance %s: the variables of history entry %d: %w", inst.ID, ev.Seq, err)
				}
				if current == nil {
					current = map[string]any{}
				}
			case len(d.Changed) > 0:
				// The changes since the copy before: applied to a copy of
				// it (the steps before keep theirs). After a copy omitted,
				// there is nothing to apply them to: the reason stays.
				var changed map[string]any
				if err := json.Unmarshal(d.Changed, &changed); err != nil {
					return nil, nil, fmt.Errorf("engine: instance %s: the variables changed in history entry %d: %w", inst.ID, ev.Seq, err)
				}
				if current != nil {
					current = maps.Clone(current)
					maps.Copy(current, changed)
				}
			case d.Omitted > 0:
				current, omitted = nil, fmt.Sprintf("its variables (%d bytes) were larger than history.vars_limit when it began", d.Omitted)
			case d.Error != "":
				current, omitted = nil, "its variables could not be recorded: "+d.Error
			}
			if ev.Type != weft.HistoryStepStarted || !top[d.Step] {
				continue
			}
			p := weft.ResetPoint{Step: d.Step, Seq: ev.Seq, Time: ev.Time, Vars: current != nil}
			switch {
			case current != nil:
				vars[d.Step] = current
			case omitted != "":
				p.Reason = omitted
			default:
				p.Reason = "it began before the host recorded variables"
			}
			points[d.Step] = p
		}
		if len(evs) < historyPage {
			return points, vars, nil
		}
	}
}

// topLevel reports whether a history entry's step path is a step of the
// definition's top-level list: "steps[3]".
func topLevel(path string) bool {
	rest, ok := strings.CutPrefix(path, "steps[")
	if !ok {
		return false
	}
	n, ok := strings.CutSuffix(rest, "]")
	_, err := strconv.Atoi(n)
	return ok && err == nil
}

// Reset runs an instance again from step, a step of its definition's
// top-level list, with the variables it had when that step last began
// (runner.Reset): a message in its inbox, and the instance queued. A
// finished instance runs again (its retention starts over when it
// finishes again); a paused one stays paused, at the step. The step
// runs as a new execution: its activities get new idempotency keys, so a
// reset repeats their effects (docs/operations.md, "Reset"). op says who
// asks, why and when; the instance_reset entry records it.
//
// It returns an error matching weft.ErrNotFound for no such instance and
// weft.ErrNotResettable, saying why, for a step the instance cannot be
// reset to (ResetPoints lists those it can).
func (e *Engine) Reset(ctx context.Context, id, step string, op weft.Operation) error {
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return err
	}
	if op.At.IsZero() {
		op.At = e.cfg.Now()
	}
	msg, err := e.resetMessage(ctx, inst, step, op)
	if err != nil {
		return err
	}
	if _, err := e.store.Deliver(ctx, nil, []weft.Message{msg}); err != nil {
		return err
	}
	e.notify(ctx, itemOf(id, "reset", inst.Order))
	return nil
}

// resetMessage is the message that resets inst to step, with op, or why
// it cannot (see Reset).
func (e *Engine) resetMessage(ctx context.Context, inst *weft.Instance, step string, op weft.Operation) (weft.Message, error) {
	id := inst.ID
	if inst.Status == weft.StatusPending {
		return weft.Message{}, fmt.Errorf("engine: instance %s has not started: %w", id, weft.ErrNotResettable)
	}
	prog, err := e.program(ctx, inst.Workflow, inst.Version)
	if err != nil {
		return weft.Message{}, err
	}
	points, vars, err := e.resetPoints(ctx, inst, prog)
	if err != nil {
		return weft.Message{}, err
	}
	p, ok := points[step]
	switch {
	case !ok && !topStep(prog, step):
		return weft.Message{}, fmt.Errorf("engine: instance %s: %s version %d has no top-level step %q: %w", id, inst.Workflow, inst.Version, step, weft.ErrNotResettable)
	case !ok:
		return weft.Message{}, fmt.Errorf("engine: instance %s never began step %q: %w", id, step, weft.ErrNotResettable)
	case !p.Vars:
		return weft.Message{}, fmt.Errorf("engine: instance %s cannot be reset to step %q: %s: %w", id, step, p.Reason, weft.ErrNotResettable)
	}
	payload, err := json.Marshal(resetRequest{Step: step, Vars: vars[step]})
	if err != nil {
		return weft.Message{}, fmt.Errorf("engine: reset of instance %s: %w", id, err)
	}
	return weft.Message{InstanceID: id, ID: "reset:" + opID(op, e.cfg.Now()), Kind: weft.MessageReset, Payload: payload, Op: &op}, nil
}

// topStep reports whether prog's top-level list has a step with id.
func topStep(prog *runner.Program, id string) bool {
	for _, s := range prog.Definition().Steps {
		if s.ID == id {
			return true
		}
	}
	return false
}
