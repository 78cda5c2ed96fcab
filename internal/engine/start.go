package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/store"
)

// Starting instances: create-if-absent in the store, then the ready queue.

// Start creates an instance of the latest version of workflow with input,
// pinning the current version of every plugin it uses, and queues it. The
// instance is durably stored when Start returns.
//
// The input is JSON, stored as it is given (the store refuses it when it is
// not valid JSON, with ErrInvalid); nil is null. A caller that has the
// input's bytes, as the HTTP API does, hands them over without decoding
// them.
//
// A non-empty id makes the call idempotent: when an instance with that id
// exists, of the same workflow, it is returned as it is, with created
// false; of another workflow, the error matches ErrIDInUse. Of concurrent
// Starts with one id, exactly one creates: the store's commit creates only
// if absent.
func (e *Engine) Start(ctx context.Context, workflow string, input json.RawMessage, id string) (inst *weft.Instance, created bool, err error) {
	inst, created, _, err = e.start(ctx, workflow, input, id, false)
	return inst, created, err
}

// StartWatched is Start, and returns a Watch of the instance, registered
// before the instance is queued: waiting on it needs no first read of the
// store, as no commit can come before it. The caller must Stop it.
func (e *Engine) StartWatched(ctx context.Context, workflow string, input json.RawMessage, id string) (*weft.Instance, bool, *Watch, error) {
	return e.start(ctx, workflow, input, id, true)
}

func (e *Engine) start(ctx context.Context, workflow string, input json.RawMessage, id string, watched bool) (*weft.Instance, bool, *Watch, error) {
	var w *Watch
	if watched && id != "" {
		// Before create: an instance with this id may exist and change.
		w = e.watch(id)
	}
	inst, created, err := e.create(ctx, workflow, input, id, nil)
	if err != nil {
		if w != nil {
			w.Stop()
		}
		return nil, false, nil, err
	}
	if watched && w == nil {
		w = e.watch(inst.ID) // a new id: nothing has queued it yet
	}
	if w != nil {
		w.inst = inst
	}
	// An existing instance is run again unless it has ended: the Start
	// that created it may have died before running or queueing it.
	if created || !inst.Status.Terminal() {
		e.dispatch(ctx, inst.ID)
	}
	return inst, created, w, nil
}

// dispatch hands a started instance to an idle worker of this node
// (Config.EagerStarts), or else queues it.
func (e *Engine) dispatch(ctx context.Context, id string) {
	select {
	case e.eager <- id: // nil without EagerStarts: never ready
		return
	default:
	}
	e.push(ctx, id, "start")
}

// push queues an instance, logging a failure: the sweeps find its work
// again (due timers, inbox, lease expiry).
func (e *Engine) push(ctx context.Context, id, reason string) {
	if err := e.queue.Push(ctx, queue.Item{InstanceID: id, Reason: reason}); err != nil && ctx.Err() == nil {
		e.log.Warn("queueing instance", "instance", id, "err", err)
	}
}

// startFire is Start for a schedule's fire, whose id is most likely new:
// it does not look for an instance with the id before creating one (the
// commit's create-if-absent finds it), which saves a fire a read.
func (e *Engine) startFire(ctx context.Context, workflow string, input json.RawMessage, id string) error {
	inst, created, err := e.createAs(ctx, workflow, input, id, nil, false)
	if err != nil {
		return err
	}
	if created || !inst.Status.Terminal() {
		e.dispatch(ctx, inst.ID)
	}
	return nil
}

// create stores a new pending instance (idempotently by id, see Start)
// without queueing it.
func (e *Engine) create(ctx context.Context, workflow string, input json.RawMessage, id string, parent *weft.ParentRef) (*weft.Instance, bool, error) {
	return e.createAs(ctx, workflow, input, id, parent, true)
}

// createAs is create; lookFirst reads the instance with a given id before
// anything else, which answers a retried start without the definition or
// its plugins (they may have changed since).
func (e *Engine) createAs(ctx context.Context, workflow string, input json.RawMessage, id string, parent *weft.ParentRef, lookFirst bool) (*weft.Instance, bool, error) {
	if id != "" && lookFirst {
		// The common case of a retried start, answered without needing the
		// definition or its plugins, which may have changed since.
		if old, err := e.existing(ctx, workflow, id); old != nil || err != nil {
			return old, false, err
		}
	}
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	if id == "" {
		id = newID(e.cfg.Now())
	}
	// The catalog as the store last read it, at no cost; if it changed
	// since, the commit says so and the start reads it again.
	inst, rev, at, err := e.createFrom(ctx, workflow, input, id, parent, true)
	if errors.Is(err, store.ErrCatalogChanged) {
		inst, rev, at, err = e.createFrom(ctx, workflow, input, id, parent, false)
	}
	if errors.Is(err, weft.ErrExists) {
		// Another Start with the id created it between the check above
		// and this commit.
		old, err := e.existing(ctx, workflow, id)
		if old == nil && err == nil {
			err = fmt.Errorf("engine: instance %s exists and then did not: %w", id, weft.ErrNotFound)
		}
		return old, false, err
	}
	if err != nil {
		return nil, false, err
	}
	e.cfg.Observer.InstanceStatus(inst.Workflow, weft.StatusPending)
	e.changed(inst.ID)
	// The instance as the store holds it: it keeps JSON compacted.
	inst.Rev, inst.CreatedAt, inst.UpdatedAt = rev, at, at
	var compacted bytes.Buffer
	if err := json.Compact(&compacted, input); err == nil {
		inst.Input = compacted.Bytes()
	}
	return inst, true, nil
}

// createFrom reads the latest definition of workflow and the current
// version of each plugin it uses (store.ResolveStart: cached, from what
// the store read before, unchecked) and commits the instance created from
// them, which the store refuses with ErrCatalogChanged when a cached
// catalog has changed since. It returns the instance committed, its
// revision and time.
func (e *Engine) createFrom(ctx context.Context, workflow string, input json.RawMessage, id string, parent *weft.ParentRef, cached bool) (*weft.Instance, uint64, time.Time, error) {
	var prog *runner.Program
	var progErr error
	uses := func(d *weft.Definition) ([]string, error) {
		prog, progErr = e.program(ctx, d.Name, d.Version)
		if progErr != nil {
			return nil, progErr
		}
		return prog.Plugins(), nil
	}
	cat, err := e.store.ResolveStart(ctx, workflow, uses, cached)
	if err != nil {
		var pe *store.PluginError
		switch {
		case progErr != nil && errors.Is(err, progErr): // the definition's own error
		case errors.As(err, &pe):
			err = fmt.Errorf("engine: workflow %s uses plugin %s: %w", workflow, pe.Plugin, pe.Err)
		case errors.Is(err, weft.ErrNotFound):
			err = fmt.Errorf("engine: %w %q: %w", weft.ErrNoSuchWorkflow, workflow, err)
		default:
			err = fmt.Errorf("engine: workflow %s: %w", workflow, err)
		}
		return nil, 0, time.Time{}, err
	}
	pins := make(map[string]string, len(cat.Plugins))
	for name, p := range cat.Plugins {
		pins[name] = p.Version
	}
	d := cat.Definition
	inst := &weft.Instance{
		ID: id, Workflow: d.Name, Version: d.Version, Status: weft.StatusPending, Input: input,
		Plugins: pins, Persistence: string(prog.Definition().Persistence), Parent: parent,
	}
	// No timers, no bookmarks: process relies on it to skip reading them
	// for an instance at revision 1. At makes the stored times known here,
	// so the instance need not be read back.
	at := e.cfg.Now().UTC()
	rev, err := e.store.Commit(ctx, store.Commit{
		Instance: inst, History: []weft.HistoryEntry{{Type: weft.HistoryInstanceCreated, Node: e.cfg.NodeID}},
		Catalog: cat.Generation, At: at,
	})
	if err != nil && !errors.Is(err, weft.ErrExists) && !errors.Is(err, store.ErrCatalogChanged) {
		err = fmt.Errorf("engine: creating instance of %s: %w", workflow, err)
	}
	return inst, rev, at, err
}

// existing returns the instance id when it exists and belongs to workflow,
// nil when there is none, and an error matching ErrIDInUse when it belongs
// to another workflow.
func (e *Engine) existing(ctx context.Context, workflow, id string) (*weft.Instance, error) {
	old, err := e.store.GetInstance(ctx, id)
	switch {
	case errors.Is(err, weft.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, err
	case old.Workflow != workflow:
		return nil, fmt.Errorf("engine: %w: instance %q belongs to workflow %q", weft.ErrIDInUse, id, old.Workflow)
	}
	return old, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// newID returns a time-ordered instance id: milliseconds, then randomness.
func newID(now time.Time) string {
	b := make([]byte, 6, 14)
	ms := uint64(now.UnixMilli())
	for i := 5; i >= 0; i-- {
		b[i] = byte(ms)
		ms >>= 8
	}
	return hex.EncodeToString(b) + randomHex(8)
}
