package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store"
)

// Concurrency limits by key (docs/flow-control.md): a workflow's
// `concurrency: {key, limit, policy}` lets at most limit of its instances
// with one key run at once. An instance asks for a slot of its key when it
// would start (its first execution), holds it while it runs and while it
// waits (timers, events, children), and gives it back when it ends,
// however it ends. The slots are the store's (Store.UpdateSlots, under
// internal/slots's rules); a slot belongs to the instance, not to the node
// running it, so a node that dies does not free its instances' slots: the
// instances are recovered, still holding them.

// workflowSlotKey is the store's key of the slots of a workflow's
// concurrency key. Workflow names have no '/', so the key parses back.
func workflowSlotKey(workflow, key string) string { return "wf/" + workflow + "/" + key }

// parseWorkflowSlotKey returns the workflow and key of a store key made by
// workflowSlotKey.
func parseWorkflowSlotKey(k string) (workflow, key string, ok bool) {
	rest, ok := strings.CutPrefix(k, "wf/")
	if !ok {
		return "", "", false
	}
	return strings.Cut(rest, "/")
}

// ConcurrencyKeys returns a page of the concurrency keys that have
// running or waiting instances, of workflow, or, when it is empty, the
// activity steps' keys and then every workflow's, ordered by workflow and
// key, and the cursor of the next page.
func (e *Engine) ConcurrencyKeys(ctx context.Context, workflow, cursor string, limit int) ([]weft.ConcurrencyKey, string, error) {
	prefix := "" // the steps' keys ("step/…"), then the workflows' ("wf/…")
	if workflow != "" {
		prefix = workflowSlotKey(workflow, "")
	}
	page, next, err := e.store.SlotKeys(ctx, prefix, cursor, weft.ClampLimit(limit))
	if err != nil {
		return nil, "", fmt.Errorf("engine: listing concurrency keys: %w", err)
	}
	out := make([]weft.ConcurrencyKey, 0, len(page))
	for _, k := range page {
		if v, ok := concurrencyKeyView(k); ok {
			out = append(out, v)
		}
	}
	return out, next, nil
}

// ConcurrencyLine returns a concurrency key of workflow as ConcurrencyKeys
// shows it, and a page of its line, first in line first, with the cursor
// of the next page. A key nobody holds or waits for is an error matching
// weft.ErrNotFound.
func (e *Engine) ConcurrencyLine(ctx context.Context, workflow, key, cursor string, limit int) (*weft.ConcurrencyKey, []weft.SlotWaiter, string, error) {
	return e.concurrencyLine(ctx, workflowSlotKey(workflow, key), fmt.Sprintf("concurrency key %q of workflow %s", key, workflow), cursor, limit)
}

// StepConcurrencyLine is ConcurrencyLine for a key of the activity steps'
// concurrency limits (docs/flow-control.md, "Step limits"): its line holds
// attempts, each shown as its instance, which may appear more than once
// (a foreach's iterations, parallel branches).
func (e *Engine) StepConcurrencyLine(ctx context.Context, key, cursor string, limit int) (*weft.ConcurrencyKey, []weft.SlotWaiter, string, error) {
	return e.concurrencyLine(ctx, stepSlotKey(key), fmt.Sprintf("step concurrency key %q", key), cursor, limit)
}

// concurrencyLine reads the store's key sk; what names it in errors.
func (e *Engine) concurrencyLine(ctx context.Context, sk, what, cursor string, limit int) (*weft.ConcurrencyKey, []weft.SlotWaiter, string, error) {
	// The key itself: the first of the keys from it on, if it is that.
	page, _, err := e.store.SlotKeys(ctx, sk, "", 1)
	if err != nil {
		return nil, nil, "", fmt.Errorf("engine: reading %s: %w", what, err)
	}
	if len(page) == 0 || page[0].Key != sk {
		return nil, nil, "", fmt.Errorf("engine: %s: nothing runs or waits: %w", what, weft.ErrNotFound)
	}
	v, _ := concurrencyKeyView(page[0])
	line, next, err := e.store.SlotLine(ctx, sk, cursor, weft.ClampLimit(limit))
	if err != nil {
		return nil, nil, "", fmt.Errorf("engine: reading the line of %s: %w", what, err)
	}
	waiters := make([]weft.SlotWaiter, len(line))
	for i, w := range line {
		id := w.ID
		if v.Step {
			id, _ = runner.HolderInstance(w.ID)
		}
		waiters[i] = weft.SlotWaiter{Instance: id, Since: w.Since}
	}
	return &v, waiters, next, nil
}

// concurrencyKeyView is the API's view of a store's key: a workflow's or
// the steps'.
func concurrencyKeyView(k store.SlotKey) (weft.ConcurrencyKey, bool) {
	wf, key, ok := parseWorkflowSlotKey(k.Key)
	step := false
	if !ok {
		if key, step = strings.CutPrefix(k.Key, "step/"); !step {
			return weft.ConcurrencyKey{}, false
		}
	}
	st := slots.State{Holders: k.Holders}.Stats()
	v := weft.ConcurrencyKey{
		Workflow: wf, Key: key, Step: step, Limit: k.Limit, Policy: string(k.Policy),
		Running: st.Running, Cancelling: st.Cancelling, Waiting: k.Waiting, OldestWait: k.OldestWait,
		Holders: make([]weft.SlotHolder, len(k.Holders)),
	}
	if v.Policy == "" {
		v.Policy = string(slots.Queue)
	}
	for i, h := range k.Holders {
		id := h.ID
		if step {
			id, _ = runner.HolderInstance(h.ID)
		}
		v.Holders[i] = weft.SlotHolder{Instance: id, Since: h.Since, Cancelling: h.Cancelling}
	}
	return v, true
}

// slotsNeverExpire is when every workflow slot's lease ends. A workflow's
// slot belongs to its instance, which holds it for as long as it lives
// (days, when it waits for an event), and not to a node: it is never
// renewed and never expires. It is given back when the instance ends,
// and the slots sweep gives back the slots of instances that ended or
// were deleted without giving theirs back (their node died in between).
// One expiry for all, rather than a long lease from each call's now, so
// that asking again for a slot one holds (a promoted instance as it
// starts, a recovered one) changes nothing, and the store writes nothing.
var slotsNeverExpire = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// workflowSlotLease is the lease of a workflow's slot granted at now:
// until slotsNeverExpire.
func workflowSlotLease(now time.Time) time.Duration { return slotsNeverExpire.Sub(now) }

// slotParams are the terms of a definition's concurrency limit for a
// call at now.
func slotParams(c *definition.Concurrency, now time.Time) slots.Params {
	return slots.Params{Limit: c.Limit, Policy: c.Policy, Lease: workflowSlotLease(now)}
}

// admit asks for a slot of the instance's concurrency key before it
// starts (pending) or runs again (a failed instance asked to retry). It
// reports whether the instance may run: an instance of a workflow without
// a limit always may. One that must wait is in its key's line; a pending
// one is marked waiting (weft.Concurrency.WaitingSince) with an entry in
// its history, once. One that the cancel_newest policy refuses is
// cancelled here.
func (x *execution) admit() (bool, error) {
	c := x.inst.Concurrency
	if c == nil {
		return true, nil
	}
	dc := x.prog.Definition().Concurrency
	if dc == nil {
		// Its version had a limit when it was created: an import from a
		// host whose definition differs. Nothing to obey.
		return true, nil
	}
	key := workflowSlotKey(x.inst.Workflow, c.Key)
	now := x.e.cfg.Now()
	d, err := x.e.store.UpdateSlots(x.ctx, key, x.inst.ID, slotParams(dc, now), now, slots.Acquire)
	if err != nil {
		return false, fmt.Errorf("instance %s: acquiring a slot of concurrency key %q: %w", x.inst.ID, c.Key, err)
	}
	x.e.slotsDecided(x.ctx, x.inst.Workflow, c.Key, d)
	switch d.Outcome {
	case slots.Granted:
		if !c.WaitingSince.IsZero() {
			waited := now.Sub(c.WaitingSince)
			x.inst.Concurrency = &weft.Concurrency{Key: c.Key}
			x.next.history = append(x.next.history, weft.HistoryEntry{
				Type: weft.HistorySlotAcquired, Time: now, Node: x.e.cfg.NodeID,
				Data: slotData(c.Key, dc.Limit, map[string]any{"waited_ms": waited.Milliseconds()}),
			})
			x.next.dirty = true
			x.e.cfg.Observer.SlotWaited(x.inst.Workflow, waited)
		}
		return true, nil
	case slots.Refused:
		if x.inst.Status != weft.StatusPending {
			// A retry is not a newcomer to cancel: it is asked again at the
			// recovery sweep's next look at its inbox, until a slot is free.
			return false, nil
		}
		x.e.cfg.Observer.SlotCancelled(x.inst.Workflow, string(slots.CancelNewest))
		x.apply(runner.Cancel{Op: weft.Operation{Actor: weft.ActorEngine, At: now,
			Reason: fmt.Sprintf("concurrency: %d instances of key %q run already, and the policy is %s", dc.Limit, c.Key, slots.CancelNewest)}})
		return false, nil
	}
	// Waiting.
	if x.inst.Status == weft.StatusPending && c.WaitingSince.IsZero() {
		return false, x.markWaiting(c.Key, dc.Limit, now)
	}
	return false, nil
}

// markWaiting commits a pending instance as waiting in its key's line:
// the recovery sweeps leave it alone (its turn wakes it), and the API
// shows since when it waits.
func (x *execution) markWaiting(key string, limit int, now time.Time) error {
	inst := x.inst
	inst.Concurrency = &weft.Concurrency{Key: key, WaitingSince: now.UTC()}
	c := store.Commit{
		Instance: inst, Fence: x.lease.Token(), At: now.UTC(),
		History: []weft.HistoryEntry{{Type: weft.HistorySlotWaiting, Time: now, Node: x.e.cfg.NodeID, Data: slotData(key, limit, nil)}},
	}
	rev, err := x.e.store.Commit(x.ctx, c)
	if err != nil {
		return fmt.Errorf("instance %s: marking it waiting for a slot of concurrency key %q: %w", inst.ID, key, err)
	}
	inst.Rev, inst.Fence, inst.UpdatedAt = rev, c.Fence, c.At
	x.e.changed(inst.ID)
	return nil
}

// cancelRequested reports whether the inbox of an instance that waits for
// a slot asks to cancel it: the run then applies it (a cancelled waiter
// leaves the line), and otherwise leaves the inbox for when it starts.
func (x *execution) cancelRequested() (bool, error) {
	if !x.inst.InboxWaiting {
		return false, nil
	}
	msgs, err := x.e.store.Inbox(x.ctx, x.inst.ID)
	if err != nil {
		return false, err
	}
	for _, m := range msgs {
		if m.Kind == weft.MessageCancel {
			return true, nil
		}
	}
	return false, nil
}

// slotData is the data of a history entry about a slot.
func slotData(key string, limit int, more map[string]any) json.RawMessage {
	m := map[string]any{"key": key, "limit": limit}
	maps.Copy(m, more)
	b, _ := json.Marshal(m) // strings and numbers: cannot fail
	return b
}

// releaseSlot gives back the slot of an instance that ended, or its place
// in its key's line, and wakes whom that lets run. A failure is logged:
// the slots sweep gives the slot back later, with logCtx (a turn's, a
// request's).
func (e *Engine) releaseSlot(ctx, logCtx context.Context, inst *weft.Instance, dc *definition.Concurrency) {
	c := inst.Concurrency
	key := workflowSlotKey(inst.Workflow, c.Key)
	var p slots.Params
	now := e.cfg.Now()
	if dc != nil {
		p = slotParams(dc, now)
	} else if p, _ = e.storedParams(ctx, key, now); p.Limit == 0 {
		return // nothing holds or waits under the key
	}
	d, err := e.store.UpdateSlots(context.WithoutCancel(ctx), key, inst.ID, p, now, slots.Release)
	if err != nil {
		e.log.WarnContext(logCtx, "giving back a concurrency slot; the slots sweep will", "instance", inst.ID, "workflow", inst.Workflow, "key", c.Key, "err", err)
		return
	}
	e.slotsDecided(ctx, inst.Workflow, c.Key, d)
}

// slotChanged does what a commit's slot change asks (slotsDecided), and
// logs one that failed after its commit (Redis), with logCtx: the sweeps
// repair it.
func (e *Engine) slotChanged(ctx, logCtx context.Context, inst *weft.Instance, sc *store.SlotChange) {
	if sc.Err != nil {
		e.log.WarnContext(logCtx, "a concurrency slot's change after its commit failed; the slots sweep repairs it", "instance", inst.ID, "workflow", inst.Workflow, "key", sc.Key, "err", sc.Err)
		return
	}
	e.slotsDecided(ctx, inst.Workflow, inst.Concurrency.Key, sc.Decision)
}

// storedParams are the terms the store keeps with a key (those of its last
// call), for a caller without a definition's: zero when the key is gone.
func (e *Engine) storedParams(ctx context.Context, key string, now time.Time) (slots.Params, error) {
	page, _, err := e.store.SlotKeys(ctx, key, "", 1)
	if err != nil || len(page) == 0 || page[0].Key != key {
		return slots.Params{}, err
	}
	return slots.Params{Limit: page[0].Limit, Policy: page[0].Policy, Lease: workflowSlotLease(now)}, nil
}

// slotsDecided does what a decision on a key asks of the engine: it
// queues the instances promoted (their turn came: they start), and
// cancels those a cancel_oldest acquisition listed.
func (e *Engine) slotsDecided(ctx context.Context, workflow, key string, d slots.Decision) {
	for _, g := range d.Promoted {
		e.pushSoon(ctx, e.itemRead(ctx, g.ID, reasonSlot))
	}
	for _, c := range d.Cancel {
		op := weft.Operation{Actor: weft.ActorEngine, Reason: fmt.Sprintf("concurrency: newer instances of key %q run, and the policy is %s", key, slots.CancelOldest)}
		_, err := e.Cancel(ctx, c.ID, op)
		if err == nil {
			e.cfg.Observer.SlotCancelled(workflow, string(slots.CancelOldest))
		} else if !errors.Is(err, weft.ErrFinished) && !errors.Is(err, weft.ErrNotFound) && ctx.Err() == nil {
			e.log.WarnContext(ctx, "cancelling an instance for a newer one of its concurrency key", "instance", c.ID, "workflow", workflow, "key", key, "err", err)
		}
	}
}

// reasonSlot is the queue reason of an instance whose turn for a slot
// came.
const reasonSlot = "slot"

// sweepSlots gives back the slots of instances that ended or were deleted
// without giving them back (their node died between the commit and the
// release), and queues again the holders that never started (their node
// died between the promotion and the push): so nothing waits forever for
// a slot freed by an instance that is gone. It does the same for the
// slots of steps, whose holders are attempts, and also ends the leases
// that ran out (an attempt on a node that died), waking the attempts next
// in line. One pass over the keys that have holders, a page at a time.
func (e *Engine) sweepSlots(ctx context.Context) {
	for _, prefix := range []string{"wf/", "step/"} {
		for cursor := ""; ; {
			page, next, err := e.store.SlotKeys(ctx, prefix, cursor, 200)
			if err != nil {
				if ctx.Err() == nil {
					e.log.Warn("listing concurrency keys", "err", err)
				}
				return
			}
			if err := e.sweepSlotPage(ctx, page); err != nil {
				if ctx.Err() == nil {
					e.log.Warn("sweeping concurrency keys", "err", err)
				}
				return
			}
			if next == "" {
				break
			}
			cursor = next
		}
	}
}

// sweepSlotPage is sweepSlots' work on one page of keys.
func (e *Engine) sweepSlotPage(ctx context.Context, page []store.SlotKey) error {
	// holderInstance is the instance of a holder: itself for a workflow's
	// key, its attempt's for a step's.
	holderInstance := func(k store.SlotKey, holder string) string {
		if strings.HasPrefix(k.Key, "step/") {
			id, _ := runner.HolderInstance(holder)
			return id
		}
		return holder
	}
	var ids []string
	for _, k := range page {
		for _, h := range k.Holders {
			if id := holderInstance(k, h.ID); id != "" {
				ids = append(ids, id)
			}
		}
	}
	statuses, err := e.store.InstanceStatuses(ctx, ids)
	if err != nil {
		return fmt.Errorf("reading the statuses of slot holders: %w", err)
	}
	now := e.cfg.Now()
	for _, k := range page {
		step := strings.HasPrefix(k.Key, "step/")
		p := slots.Params{Limit: max(k.Limit, 1), Policy: k.Policy, Lease: workflowSlotLease(now)}
		if step {
			p.Lease = e.cfg.LockTTL // unused by a release or an expiry, which grant nothing but promotions
		}
		expired := false
		for _, h := range k.Holders {
			id := holderInstance(k, h.ID)
			st, ok := statuses[id]
			switch {
			case !h.Expiry.After(now):
				expired = true
			case id == "" || !ok || st.Terminal():
				if err := e.reclaimSlot(ctx, k.Key, h.ID, id, p); err != nil {
					return fmt.Errorf("giving back slot of %s under %q: %w", h.ID, k.Key, err)
				}
			case !step && st == weft.StatusPending && now.Sub(h.Since) > e.cfg.LockTTL && !e.heldOff(id):
				// Its turn came a while ago and it has not started: its
				// wake-up was lost. Only if its lock is free: a lazy
				// instance stays pending while it runs.
				e.push(ctx, e.itemRead(ctx, id, reasonSwept))
			}
		}
		if expired {
			// An attempt whose node died: its lease ran out, never
			// earlier; the next in line get the slots.
			d, err := e.store.UpdateSlots(ctx, k.Key, "sweep", p, now, store.ExpireSlots)
			if err != nil {
				return fmt.Errorf("expiring the leases of %q: %w", k.Key, err)
			}
			e.log.Info("concurrency slots whose lease ran out were given back", "key", k.Key, "holders", d.Expired)
			e.keyDecided(ctx, k.Key, d)
		}
	}
	return nil
}

// keyDecided does what a decision on the store's key asks, for a
// workflow's key or a step's.
func (e *Engine) keyDecided(ctx context.Context, key string, d slots.Decision) {
	if strings.HasPrefix(key, "step/") {
		e.stepSlotsDecided(ctx, d)
		return
	}
	wf, k, _ := parseWorkflowSlotKey(key)
	e.slotsDecided(ctx, wf, k, d)
}

// reclaimSlot gives back the slot of holder, whose instance id the sweep
// found ended or gone, under the instance's lock, which every change of
// its status holds: a failed instance retried since the sweep read its
// status (it holds its slot again, as a holder that Acquires again) keeps
// it. An instance whose lock is taken is left to a later sweep.
func (e *Engine) reclaimSlot(ctx context.Context, key, holder, id string, p slots.Params) error {
	if id != "" {
		lease, ok, err := e.locks.TryAcquire(ctx, InstanceLockKey(id), e.cfg.LockTTL)
		if err != nil || !ok {
			return err
		}
		defer lease.Release(context.WithoutCancel(ctx))
		st, err := e.store.InstanceStatuses(ctx, []string{id})
		if err != nil {
			return err
		}
		if s, ok := st[id]; ok && !s.Terminal() {
			return nil
		}
	}
	attrs := []any{"holder", holder, "key", key}
	if id != "" {
		attrs = append(attrs, "instance", id)
	}
	e.log.InfoContext(ctx, "giving back the concurrency slot of an instance that ended or is gone", attrs...)
	d, err := e.store.UpdateSlots(ctx, key, holder, p, e.cfg.Now(), slots.Release)
	if err != nil {
		return err
	}
	e.keyDecided(ctx, key, d)
	return nil
}

// importSlot prepares an imported instance under its concurrency limit:
// its place in a line it waited in elsewhere is not here, so a pending one
// asks for a slot when it starts, as a new one does; one that has started
// takes a slot now, and is refused with weft.ErrSlotsTaken when every
// slot is taken (it cannot wait: it was running). (A replaced instance
// that holds the slot already has it again.)
func (e *Engine) importSlot(ctx context.Context, in *weft.Instance, dc *definition.Concurrency) error {
	if in.Concurrency == nil {
		return nil
	}
	c := *in.Concurrency
	c.WaitingSince = time.Time{}
	in.Concurrency = &c
	if dc == nil || in.Status == weft.StatusPending || in.Status.Terminal() {
		return nil
	}
	key := workflowSlotKey(in.Workflow, c.Key)
	now := e.cfg.Now()
	p := slotParams(dc, now)
	p.Policy = slots.CancelNewest // refuse rather than queue: it cannot wait
	d, err := e.store.UpdateSlots(ctx, key, in.ID, p, now, slots.Acquire)
	if err != nil {
		return fmt.Errorf("engine: importing instance %s: acquiring a slot of concurrency key %q: %w", in.ID, c.Key, err)
	}
	e.slotsDecided(ctx, in.Workflow, c.Key, d)
	if d.Outcome != slots.Granted {
		return fmt.Errorf("engine: importing instance %s, which has started: %w (key %q, limit %d)", in.ID, weft.ErrSlotsTaken, c.Key, dc.Limit)
	}
	return nil
}
