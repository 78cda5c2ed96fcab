package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/jsonv"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/slots"
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
	inst, created, _, err = e.start(ctx, workflow, input, weft.StartOptions{ID: id}, false)
	return inst, created, err
}

// StartWatched is Start with options (an instance's own priority), and
// returns a Watch of the instance, registered before the instance is
// queued: waiting on it needs no first read of the store, as no commit can
// come before it. The caller must Stop it. A priority out of bounds is an
// error matching weft.ErrInvalid.
func (e *Engine) StartWatched(ctx context.Context, workflow string, input json.RawMessage, opts weft.StartOptions) (*weft.Instance, bool, *Watch, error) {
	return e.start(ctx, workflow, input, opts, true)
}

func (e *Engine) start(ctx context.Context, workflow string, input json.RawMessage, opts weft.StartOptions, watched bool) (*weft.Instance, bool, *Watch, error) {
	if err := (weft.Order{Priority: opts.Priority}).Check(); err != nil {
		return nil, false, nil, fmt.Errorf("engine: starting %s: %w", workflow, err)
	}
	id := opts.ID
	var w *Watch
	if watched && id != "" {
		// Before create: an instance with this id may exist and change.
		w = e.watch(id)
	}
	inst, created, err := e.createAs(ctx, creation{workflow: workflow, input: input, id: id, priority: opts.Priority, lookFirst: true})
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
		e.dispatch(ctx, inst)
	}
	return inst, created, w, nil
}

// dispatch hands a started instance to an idle worker of this node
// (Config.EagerStarts), or else queues it.
func (e *Engine) dispatch(ctx context.Context, inst *weft.Instance) {
	if inst.Hold != nil {
		return // its workflow is paused: the resume queues it
	}
	it := itemOf(inst.ID, "start", inst.Order)
	select {
	case e.eager <- it: // nil without EagerStarts: never ready
		return
	default:
	}
	e.push(ctx, it)
}

// itemOf is the queue item of work of instance id, in the instance's
// order.
func itemOf(id, reason string, o weft.Order) queue.Item {
	return queue.Item{InstanceID: id, Reason: reason, Priority: o.Priority, Key: o.FairnessKey, Weight: o.FairnessWeight}
}

// push queues an instance's work, logging a failure: the sweeps find its
// work again (due timers, inbox, lease expiry).
func (e *Engine) push(ctx context.Context, it queue.Item) {
	if err := e.queue.Push(ctx, it); err != nil && ctx.Err() == nil {
		e.log.WarnContext(ctx, "queueing instance", "instance", it.InstanceID, "err", err)
	}
}

// startFire is Start for a schedule's fire, whose id is most likely new:
// it does not look for an instance with the id before creating one (the
// commit's create-if-absent finds it), which saves a fire a read.
func (e *Engine) startFire(ctx context.Context, workflow string, input json.RawMessage, id string, priority int) error {
	inst, created, err := e.createAs(ctx, creation{workflow: workflow, input: input, id: id, priority: priority})
	if err != nil {
		return err
	}
	if created || !inst.Status.Terminal() {
		e.dispatch(ctx, inst)
	}
	return nil
}

// create stores a new pending instance (idempotently by id, see Start)
// without queueing it.
func (e *Engine) create(ctx context.Context, workflow string, input json.RawMessage, id string, parent *weft.ParentRef) (*weft.Instance, bool, error) {
	return e.createAs(ctx, creation{workflow: workflow, input: input, id: id, parent: parent, lookFirst: true})
}

// creation is what createAs creates an instance from.
type creation struct {
	workflow string
	input    json.RawMessage
	id       string // "" for a new one
	parent   *weft.ParentRef
	// priority, when not 0, is the start's own; otherwise a child has its
	// parent's order and any other instance its definition's.
	priority int
	// lookFirst reads the instance with a given id before anything
	// else, which answers a retried start without the definition or its
	// plugins (they may have changed since).
	lookFirst bool
}

// createAs is create, with the choices of c.
func (e *Engine) createAs(ctx context.Context, c creation) (*weft.Instance, bool, error) {
	workflow, input, id := c.workflow, c.input, c.id
	if id != "" && c.lookFirst {
		// The common case of a retried start, answered without needing the
		// definition or its plugins, which may have changed since.
		if old, err := e.existing(ctx, workflow, id); old != nil || err != nil {
			return old, false, err
		}
	}
	if len(input) == 0 {
		input = json.RawMessage("null")
	}
	// Kept as its bytes from here on: made UTF-8 and compacted where it
	// enters, as decoding and encoding it did before.
	input, err := jsonv.Compact(jsonv.UTF8(input))
	if err != nil {
		return nil, false, fmt.Errorf("%w: engine: the input of %s: %v", weft.ErrInvalid, workflow, err)
	}
	if id == "" {
		id = newID(e.cfg.Now())
	}
	// The catalog as the store last read it, at no cost; if it changed
	// since, the commit says so and the start reads it again.
	c.input, c.id = input, id
	inst, rev, at, err := e.createFrom(ctx, c, true)
	if errors.Is(err, store.ErrCatalogChanged) {
		inst, rev, at, err = e.createFrom(ctx, c, false)
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
	inst.Input = input
	return inst, true, nil
}

// createFrom reads the latest definition of workflow and the current
// version of each plugin it uses (store.ResolveStart: cached, from what
// the store read before, unchecked) and commits the instance created from
// them, which the store refuses with ErrCatalogChanged when a cached
// catalog has changed since. It returns the instance committed, its
// revision and time.
func (e *Engine) createFrom(ctx context.Context, c creation, cached bool) (*weft.Instance, uint64, time.Time, error) {
	workflow, input, id, parent := c.workflow, c.input, c.id, c.parent
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
		// Its trace, decided now and kept with it (nil when tracing is
		// off): a child of ctx's span when ctx joins it (a traceparent
		// on the request, a parent's step), else a trace of its own.
		Trace: e.cfg.Tracer.Begin(ctx),
	}
	decoded := decodeOnce(c.input)
	if inst.Order, err = e.orderOf(c, prog.Definition(), decoded); err != nil {
		return nil, 0, time.Time{}, err
	}
	if inst.Concurrency, err = concurrencyOf(prog.Definition(), decoded); err != nil {
		return nil, 0, time.Time{}, err
	}
	if def := prog.Definition(); len(def.Search) > 0 {
		// Its attributes over input are searchable from its create; those
		// over vars, from the commit that sets them.
		if in, err := decoded(); err == nil {
			inst.Search = e.searchOf(e.cfg.Tracer.InInstance(ctx, inst), def, id, in, nil, nil)
		}
	}
	// No timers, no bookmarks: process relies on it to skip reading them
	// for an instance at revision 1. At makes the stored times known here,
	// so the instance need not be read back.
	at := e.cfg.Now().UTC()
	commit := store.Commit{
		Instance: inst, History: []weft.HistoryEntry{{Type: weft.HistoryInstanceCreated, Node: e.cfg.NodeID}},
		Catalog: cat.Generation, At: at,
	}
	if p := cat.Paused; p != nil {
		// Its workflow is paused: created, held, not queued, and without a
		// slot, which it asks for when it is released.
		inst.Hold = &weft.Hold{Since: at}
		data, err := json.Marshal(p.Op.Data(nil))
		if err != nil {
			return nil, 0, time.Time{}, err
		}
		commit.History = append(commit.History, weft.HistoryEntry{Type: weft.HistoryStartHeld, Node: e.cfg.NodeID, Actor: p.Op.Actor, Data: data})
	}
	if inst.Concurrency != nil && inst.Hold == nil {
		// It asks for its slot as it is created, in the same transaction
		// where the store can: its first run then finds it holds one,
		// and asks again without a write (admit).
		commit.Slot = &store.SlotChange{Key: workflowSlotKey(inst.Workflow, inst.Concurrency.Key), ID: id, Params: slotParams(prog.Definition().Concurrency, at), Now: at, Op: slots.Acquire}
	}
	rev, err := e.store.Commit(ctx, commit)
	if err != nil && !errors.Is(err, weft.ErrExists) && !errors.Is(err, store.ErrCatalogChanged) {
		err = fmt.Errorf("engine: creating instance of %s: %w", workflow, err)
	}
	if err == nil && commit.Slot != nil {
		e.slotChanged(ctx, e.cfg.Tracer.InInstance(ctx, inst), inst, commit.Slot)
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
	}
	if b, ok := e.store.(durabilityBarrier); ok {
		// A retried start is answered from a create that may not have
		// reached the replicas yet (its first answer was an error), and
		// so is a refusal of the id.
		if err := b.BarrierOf(ctx, id); err != nil {
			return nil, fmt.Errorf("engine: instance %s exists: %w", id, err)
		}
	}
	if old.Workflow != workflow {
		return nil, fmt.Errorf("engine: %w: instance %q belongs to workflow %q", weft.ErrIDInUse, id, old.Workflow)
	}
	return old, nil
}

// durabilityBarrier is a store whose writes can be applied before they
// are durable (redisstore waiting for replicas): BarrierOf returns once
// everything the store held of instance id when it was called is durable,
// or an error matching store.ErrNotDurable. An answer the engine gives
// from a read rather than from its own write calls it first.
type durabilityBarrier interface {
	BarrierOf(ctx context.Context, id string) error
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

// orderOf decides a new instance's order (weft.Order): a child's is its
// parent's; any other's is its definition's, evaluated from its input
// (an input that does not fit is refused, with weft.ErrInvalid); and a
// start's own priority goes before either.
func (e *Engine) orderOf(c creation, d *definition.Definition, input func() (any, error)) (weft.Order, error) {
	var o weft.Order
	switch {
	case c.parent != nil:
		o = c.parent.Order
	case !d.Priority.IsZero() || d.Fairness != nil:
		in, err := input()
		if err != nil {
			return o, fmt.Errorf("engine: starting %s: %w: the input is not JSON: %w", d.Name, weft.ErrInvalid, err)
		}
		if o, err = d.Order(in, c.priority); err != nil {
			return o, fmt.Errorf("engine: starting %s: %w: the input does not fit the workflow's %w", d.Name, weft.ErrInvalid, err)
		}
	}
	if c.priority != 0 {
		o.Priority = c.priority // a child's, or a definition without an order's
	}
	return o, nil
}

// decodeOnce returns a function that decodes input the first time it is
// called, and returns that result from then on: the fields a new
// instance's definition computes from its input share one decoding, and
// a definition without any decodes nothing.
func decodeOnce(input json.RawMessage) func() (any, error) {
	var (
		in   any
		err  error
		done bool
	)
	return func() (any, error) {
		if !done {
			done = true
			err = json.Unmarshal(input, &in)
		}
		return in, err
	}
}

// concurrencyOf decides a new instance's concurrency key, when its
// workflow has a concurrency limit (a child's is its own workflow's, not
// its parent's). An input that does not fit is refused with
// weft.ErrInvalid.
func concurrencyOf(d *definition.Definition, input func() (any, error)) (*weft.Concurrency, error) {
	if d.Concurrency == nil {
		return nil, nil
	}
	in, err := input()
	if err != nil {
		return nil, fmt.Errorf("engine: starting %s: %w: the input is not JSON: %w", d.Name, weft.ErrInvalid, err)
	}
	key, err := d.ConcurrencyKey(in)
	if err != nil {
		return nil, fmt.Errorf("engine: starting %s: %w: the input does not fit the workflow's %w", d.Name, weft.ErrInvalid, err)
	}
	return &weft.Concurrency{Key: key}, nil
}
