package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/runner"
)

// Then, after a migration moved an instance: nothing more, a retry of its
// failure, or a resume of its pause, applied with the move so that an
// instance stuck on a bad rollout runs on in one operation.
const (
	MigrateThenRetry  = "retry"
	MigrateThenResume = "resume"
)

// migrateRequest is the payload of a migrate message: the target, as the
// request resolved it (its version, and the instance's every pin after
// the move), and what to do after the move.
type migrateRequest struct {
	Version int               `json:"version"`
	Plugins map[string]string `json:"plugins"`
	Then    string            `json:"then,omitempty"`
}

// PlanMigration is a migration's dry run: whether the instance can move to
// target, and how (weft.MigrationPlan), without a change. ErrNotFound for
// no such instance, or no such target version.
func (e *Engine) PlanMigration(ctx context.Context, id string, target weft.MigrationTarget) (*weft.MigrationPlan, error) {
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	plan, _, err := e.planMigration(ctx, inst, target)
	return plan, err
}

// Migrate moves an instance to target — another version of its workflow,
// other versions of its plugins — when it can (PlanMigration): a message
// in its inbox, applied when the instance is at rest, which plans again
// against the state then and moves it, or, should it no longer fit,
// leaves it untouched; either is recorded in its history
// (instance_migrated, migration_refused) with op. then is "",
// MigrateThenRetry or MigrateThenResume: what the instance does once
// moved. It returns the plan; a *weft.MigrationError with it (matching
// weft.ErrNotMigratable) when the instance cannot move now, and nothing
// is sent.
func (e *Engine) Migrate(ctx context.Context, id string, target weft.MigrationTarget, then string, op weft.Operation) (*weft.MigrationPlan, error) {
	switch then {
	case "", MigrateThenRetry, MigrateThenResume:
	default:
		return nil, fmt.Errorf("engine: migration of instance %s: then %q is neither %s nor %s: %w", id, then, MigrateThenRetry, MigrateThenResume, weft.ErrInvalid)
	}
	inst, err := e.store.GetInstance(ctx, id)
	if err != nil {
		return nil, err
	}
	plan, pins, err := e.planMigration(ctx, inst, target)
	if err != nil {
		return nil, err
	}
	if !plan.CanMove {
		return plan, &weft.MigrationError{Plan: plan}
	}
	if op.At.IsZero() {
		op.At = e.cfg.Now()
	}
	msg, err := e.migrateMessage(plan, pins, then, op)
	if err != nil {
		return nil, err
	}
	if _, err := e.store.Deliver(ctx, nil, []weft.Message{msg}); err != nil {
		return nil, err
	}
	e.notify(ctx, itemOf(id, "migrate", inst.Order))
	return plan, nil
}

// migrateMessage is the message that moves an instance as plan says,
// with pins, then, and op.
func (e *Engine) migrateMessage(plan *weft.MigrationPlan, pins map[string]string, then string, op weft.Operation) (weft.Message, error) {
	payload, err := json.Marshal(migrateRequest{Version: plan.ToVersion, Plugins: pins, Then: then})
	if err != nil {
		return weft.Message{}, fmt.Errorf("engine: migration of instance %s: %w", plan.Instance, err)
	}
	return weft.Message{InstanceID: plan.Instance, ID: "migrate:" + opID(op, e.cfg.Now()), Kind: weft.MessageMigrate, Payload: payload, Op: &op}, nil
}

// planMigration plans the move of inst to target against its stored
// state, and resolves the pins it would have after the move.
func (e *Engine) planMigration(ctx context.Context, inst *weft.Instance, target weft.MigrationTarget) (*weft.MigrationPlan, map[string]string, error) {
	from, err := e.program(ctx, inst.Workflow, inst.Version)
	if err != nil {
		return nil, nil, err
	}
	version := target.Version
	if version == 0 {
		d, err := e.store.GetDefinition(ctx, inst.Workflow, 0)
		if err != nil {
			return nil, nil, fmt.Errorf("engine: the latest version of %s: %w", inst.Workflow, err)
		}
		version = d.Version
	}
	to, err := e.program(ctx, inst.Workflow, version)
	if err != nil {
		return nil, nil, err
	}
	st := &runner.State{Status: inst.Status}
	if len(inst.State) > 0 {
		if st, err = runner.Decode(inst.State, inst.Input, inst.Vars); err != nil {
			return nil, nil, fmt.Errorf("engine: instance %s: state does not decode: %w", inst.ID, err)
		}
	}
	rp := runner.PlanMigration(st, from, to)
	pins, problems, err := e.migrationPins(ctx, inst, to, version, target, rp.Activities)
	if err != nil {
		return nil, nil, err
	}
	return migrationView(inst, version, rp, pins, problems), pins, nil
}

// migrationPins works out the instance's pins after a move to the
// program to: for each plugin it calls, the version target names, else
// the instance's, else the plugin's current one; each must be stored and
// have the activities the rest of the run calls.
func (e *Engine) migrationPins(ctx context.Context, inst *weft.Instance, to *runner.Program, version int, target weft.MigrationTarget, acts map[string][]string) (map[string]string, []weft.MigrationProblem, error) {
	var problems []weft.MigrationProblem
	uses := to.Plugins()
	for _, name := range slices.Sorted(maps.Keys(target.Plugins)) {
		if !slices.Contains(uses, name) {
			problems = append(problems, weft.MigrationProblem{Message: fmt.Sprintf("plugin %s: version %d of %s does not call it", name, version, inst.Workflow)})
		}
	}
	pins := make(map[string]string, len(uses))
	for _, name := range uses {
		p, err := e.store.GetPlugin(ctx, name)
		if errors.Is(err, weft.ErrNotFound) {
			problems = append(problems, weft.MigrationProblem{Message: fmt.Sprintf("plugin %s: not uploaded", name)})
			continue
		}
		if err != nil {
			return nil, nil, err
		}
		pin := target.Plugins[name]
		if pin == "" {
			pin = inst.Plugins[name]
		}
		if pin == "" {
			pin = p.Current.Version
		}
		i := slices.IndexFunc(p.Versions, func(r weft.PluginRecord) bool { return r.Version == pin })
		if i < 0 {
			problems = append(problems, weft.MigrationProblem{Message: fmt.Sprintf("plugin %s: no version %s", name, pin)})
			continue
		}
		pins[name] = pin
		for _, a := range acts[name] {
			if !slices.Contains(p.Versions[i].Activities, a) {
				problems = append(problems, weft.MigrationProblem{Message: fmt.Sprintf("plugin %s version %s has no activity %s, which the rest of the run calls", name, short(pin), a)})
			}
		}
	}
	return pins, problems, nil
}

// short is a plugin version as a person reads it.
func short(version string) string { return version[:min(12, len(version))] }

// migrationView is a runner's plan as the API answers it.
func migrationView(inst *weft.Instance, version int, rp *runner.MigrationPlan, pins map[string]string, problems []weft.MigrationProblem) *weft.MigrationPlan {
	plan := &weft.MigrationPlan{
		Instance: inst.ID, FromVersion: inst.Version, ToVersion: version,
		At: rp.At, Problems: append(slices.Clone(rp.Problems), problems...), Notes: rp.Notes,
	}
	if plan.At == nil {
		plan.At = []weft.MigrationPoint{}
	}
	if plan.Problems == nil {
		plan.Problems = []weft.MigrationProblem{}
	}
	if plan.Notes == nil {
		plan.Notes = []string{}
	}
	for name, v := range pins {
		if inst.Plugins[name] != v {
			if plan.Plugins == nil {
				plan.Plugins = map[string]weft.PinChange{}
			}
			plan.Plugins[name] = weft.PinChange{From: inst.Plugins[name], To: v}
		}
	}
	plan.CanMove = len(plan.Problems) == 0
	return plan
}

// migrate applies a migrate message to the execution's instance, at
// rest: it plans again against the state now, and moves it, or records
// why not and leaves it as it is. Either way the message is consumed.
func (x *execution) migrate(m weft.Message) error {
	var req migrateRequest
	if err := json.Unmarshal(m.Payload, &req); err != nil {
		return fmt.Errorf("instance %s: inbox message %s: the migration: %w", x.inst.ID, m.ID, err)
	}
	op := operation(m, "")
	now := x.e.cfg.Now()
	record := func(typ weft.HistoryType, data map[string]any) error {
		raw, err := json.Marshal(op.Data(data))
		if err != nil {
			return fmt.Errorf("instance %s: recording the migration: %w", x.inst.ID, err)
		}
		x.next.history = append(x.next.history, weft.HistoryEntry{Type: typ, Time: now, Node: x.e.cfg.NodeID, Actor: op.Actor, Data: raw})
		x.next.dirty = true
		return nil
	}
	to, err := x.e.program(x.ctx, x.inst.Workflow, req.Version)
	if err != nil && !errors.Is(err, weft.ErrNotFound) {
		return err
	}
	var rp *runner.MigrationPlan
	problems := []weft.MigrationProblem{}
	if to == nil {
		problems = append(problems, weft.MigrationProblem{Message: fmt.Sprintf("version %d of %s was deleted", req.Version, x.inst.Workflow)})
	} else {
		rp = runner.PlanMigration(x.st, x.prog, to)
		problems = append(problems, rp.Problems...)
	}
	base := map[string]any{"from_version": x.inst.Version, "to_version": req.Version}
	if len(problems) > 0 {
		base["problems"] = problems
		return record(weft.HistoryMigrationRefused, base)
	}
	if err := rp.Apply(x.st); err != nil {
		base["problems"] = []weft.MigrationProblem{{Message: err.Error()}}
		return record(weft.HistoryMigrationRefused, base)
	}
	paths := make(map[string]string, len(rp.At))
	for _, p := range rp.At {
		paths[p.From] = p.To
	}
	for token, b := range x.bookmarks {
		if to, ok := paths[b.StepPath]; ok {
			b.StepPath = to
			x.bookmarks[token] = b
		}
	}
	changed := map[string]weft.PinChange{}
	for name, v := range req.Plugins {
		if x.inst.Plugins[name] != v {
			changed[name] = weft.PinChange{From: x.inst.Plugins[name], To: v}
		}
	}
	for name, v := range x.inst.Plugins {
		if _, ok := req.Plugins[name]; !ok {
			changed[name] = weft.PinChange{From: v}
		}
	}
	base["plugins"], base["notes"] = changed, rp.Notes
	x.prog = to
	x.lists = nil // the step lists of its new version, when a span needs them
	x.inst.Version, x.inst.Plugins = req.Version, req.Plugins
	x.inst.Persistence = string(to.Definition().Persistence)
	if err := record(weft.HistoryInstanceMigrated, base); err != nil {
		return err
	}
	switch req.Then {
	case MigrateThenRetry:
		x.apply(runner.Retry{Op: op})
	case MigrateThenResume:
		x.apply(runner.Resume{Op: op})
	}
	return nil
}

// migrateThen is what a migrate message does after the move; "" for
// another message.
func migrateThen(m weft.Message) string {
	if m.Kind != weft.MessageMigrate {
		return ""
	}
	var req migrateRequest
	if json.Unmarshal(m.Payload, &req) != nil {
		return ""
	}
	return req.Then
}
