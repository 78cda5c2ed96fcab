package engine

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/store"
)

// The singleton sweeps: due timers, recovery of expired leases and lost wake-ups, expired stimuli; and the requeue of pending instances at start.

// singleton runs work every interval on the one node that holds the
// try-lock key, for ttl at most; the others skip their turn
// (docs/cluster.md, "Singleton work").
func (e *Engine) singleton(ctx context.Context, key string, interval, ttl time.Duration, work func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lease, ok, err := e.locks.TryAcquire(ctx, key, ttl)
		if err != nil || !ok {
			continue
		}
		work(ctx)
		lease.Release(context.WithoutCancel(ctx))
	}
}

// singletonTTL is the lock TTL of singleton work run every interval: a
// turn that takes longer may overlap the next node's.
func singletonTTL(interval time.Duration) time.Duration { return max(time.Second, 4*interval) }

// sweepTimers queues the instances whose timers s says are due (the
// store, or one of its sweep stripes).
func (e *Engine) sweepTimers(ctx context.Context, s store.Store) {
	due, err := s.DueTimers(ctx, e.cfg.Now(), 1000)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("sweeping timers", "err", err)
	}
	seen := map[string]bool{}
	for _, tm := range due {
		if !seen[tm.InstanceID] {
			seen[tm.InstanceID] = true
			// A timer stays due until its instance runs: the next sweep
			// pushes it again.
			if err := e.queue.Push(ctx, itemOf(tm.InstanceID, "timer", tm.Order)); err != nil && ctx.Err() == nil {
				e.log.WarnContext(ctx, "queuing an instance whose timer is due", "instance", tm.InstanceID, "err", err)
			}
		}
	}
}

// requeuePending queues the instances created but not yet run: the
// in-process ready queue does not survive a restart. (Under lazy
// persistence an instance stays pending in the store until it first
// suspends or finishes, so this also resumes instances a crash interrupted.)
func (e *Engine) requeuePending(ctx context.Context) {
	n := 0
	for cursor := ""; ; {
		items, next, err := e.store.ListInstances(ctx, weft.InstanceFilter{Status: weft.StatusPending, Cursor: cursor, Limit: 1000})
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("listing pending instances", "err", err)
			}
			return
		}
		paused, err := e.pausedWorkflows(ctx)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("reading the paused workflows", "err", err)
			}
			return
		}
		for _, in := range items {
			if waitingSlot(&in) || in.Hold != nil && paused[in.Workflow] {
				continue
			}
			e.push(ctx, itemOf(in.ID, "recovery", in.Order))
			n++
		}
		if next == "" {
			break
		}
		cursor = next
	}
	if n > 0 {
		e.log.Info("queued pending instances at start-up", "count", n)
	}
}

// pausedWorkflows reads the names of the paused workflows.
func (e *Engine) pausedWorkflows(ctx context.Context) (map[string]bool, error) {
	ps, err := e.store.WorkflowPauses(ctx)
	if err != nil {
		return nil, err
	}
	paused := make(map[string]bool, len(ps))
	for _, p := range ps {
		paused[p.Workflow] = true
	}
	return paused, nil
}

// waitingSlot reports whether a pending instance waits in the line of its
// concurrency key: its turn queues it (and the slots sweep, a turn whose
// wake-up was lost), not the sweeps of pending instances.
func waitingSlot(in *weft.Instance) bool {
	return in.Concurrency != nil && !in.Concurrency.WaitingSince.IsZero()
}

// recoverySweep finds the work that a dead node, or a lost wake-up, left
// behind, and queues it: instances whose lease expired, inboxes that
// waited too long, instances created and never run, queued stimuli
// whose bookmark came after them, and concurrency slots held by
// instances that ended (sweepSlots).
func (e *Engine) recoverySweep(ctx context.Context) {
	e.recoverInstances(ctx, e.store, &e.pendingCursor)
	e.recoverCatalog(ctx)
}

// recoverInstances is the part of the recovery sweep that reads the
// instances s holds (the store, or one of its sweep stripes),
// pendingCursor where its walk of the pending instances goes on.
func (e *Engine) recoverInstances(ctx context.Context, s store.Store, pendingCursor *string) {
	e.requeueExpiredLeases(ctx, s)
	e.requeueWaitingInboxes(ctx, s)
	e.requeueStalePending(ctx, s, pendingCursor)
}

// recoverCatalog is the part of the recovery sweep that reads what is
// not an instance: queued stimuli and concurrency slots.
func (e *Engine) recoverCatalog(ctx context.Context) {
	e.pairQueued(ctx)
	e.sweepSlots(ctx)
}

// requeueExpiredLeases queues the instances whose lease expired: their
// node stopped renewing it (it died, or lost the instance). Lease expiry,
// not "not updated for a while", decides (docs/architecture.md, "Locks and
// fencing"); the instance lock then makes sure a live instance is never
// run twice.
func (e *Engine) requeueExpiredLeases(ctx context.Context, s store.Store) {
	ids, err := s.ExpiredLeases(ctx, e.cfg.Now(), 1000)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("finding expired leases", "err", err)
	}
	for _, id := range ids {
		if e.heldOff(id) {
			continue // its run failed here: its backoff queues it (run)
		}
		it, inst := e.readItem(ctx, id, "recovery")
		if inst != nil {
			// With its trace, and the node whose lease expired.
			e.log.InfoContext(e.cfg.Tracer.InInstance(ctx, inst), "recovering instance whose lease expired",
				"instance", id, "workflow", inst.Workflow, "previous_node", inst.Lease.Node)
		} else {
			e.log.InfoContext(ctx, "recovering instance whose lease expired", "instance", id)
		}
		e.push(ctx, it)
	}
}

// requeueWaitingInboxes queues the instances whose inbox has waited
// longer than a lease's TTL: they lost their wake-up (the node that wrote
// the message died before queueing the instance, or its queue was in
// memory). A worker takes such an item only when the instance's lock is
// free (reasonSwept).
func (e *Engine) requeueWaitingInboxes(ctx context.Context, s store.Store) {
	waiting, err := s.WaitingInboxes(ctx, e.cfg.Now().Add(-e.cfg.LockTTL), 1000)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("finding waiting inboxes", "err", err)
	}
	for _, id := range waiting {
		e.push(ctx, e.itemRead(ctx, id, reasonSwept))
	}
}

// requeueStalePending queues the instances created and never run (the
// node that created them died before queueing them or before running an
// eager start, or a full queue refused the push of an execution): the
// oldest pending ones first, a lease's TTL old, a page per turn, going on
// where the last turn stopped, so that one found behind many older ones
// (lazy instances stay pending while they run) waits a few turns at most.
func (e *Engine) requeueStalePending(ctx context.Context, s store.Store, cursor *string) {
	// Only those a lease's TTL old: the store reads no younger one (a
	// partitioned store would read a page of each partition's).
	cutoff := e.cfg.Now().Add(-e.cfg.LockTTL)
	pending, next, err := s.ListInstances(ctx, weft.InstanceFilter{Status: weft.StatusPending, CreatedBefore: cutoff, Cursor: *cursor, Limit: 1000})
	if err != nil && ctx.Err() == nil {
		e.log.Warn("listing pending instances", "err", err)
	}
	*cursor = next
	// A held instance waits while its workflow is paused, or while a
	// release batch releases it (at its rate, oldest first).
	var paused map[string]bool
	if slices.ContainsFunc(pending, func(in weft.Instance) bool { return in.Hold != nil }) {
		if paused, err = e.pausedWorkflows(ctx); err == nil {
			unpaused := map[string]bool{}
			for _, in := range pending {
				if in.Hold != nil && !paused[in.Workflow] {
					unpaused[in.Workflow] = true
				}
			}
			var busy map[string]bool
			if len(unpaused) > 0 {
				busy, err = e.releasing(ctx, unpaused)
			}
			maps.Copy(paused, busy)
		}
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("reading the paused workflows", "err", err)
			}
			return
		}
	}
	for _, in := range pending {
		// A held instance whose workflow is no longer paused is one the
		// release went past (its start read "paused" and committed after
		// the release's selection): queued, it releases itself.
		if e.heldOff(in.ID) || waitingSlot(&in) || in.Hold != nil && paused[in.Workflow] {
			continue
		}
		e.push(ctx, itemOf(in.ID, reasonSwept, in.Order))
	}
	if err != nil {
		*cursor = ""
	}
}

// pairQueued queues the instances that have a bookmark a queued stimulus
// matches. Signal and an execution each check for the other after writing
// (Signal looks for bookmarks again after queueing; an execution looks
// for queued stimuli when it sets a bookmark), but an execution checks
// before it commits the bookmark, and its node may die after the commit:
// a stimulus queued in between, or a bookmark committed by a node that
// died, would wait for its TTL and die. Stimuli younger than a lease's
// TTL are left to that path. One page per turn, going on where the last
// turn stopped, bounds the work of a turn however many stimuli wait.
func (e *Engine) pairQueued(ctx context.Context) {
	page, next, err := e.store.QueuedStimuli(ctx, e.pairCursor, 1000)
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("listing queued stimuli", "err", err)
		}
		e.pairCursor = ""
		return
	}
	e.pairCursor = next
	now := e.cfg.Now()
	cutoff := now.Add(-e.cfg.LockTTL)
	type pair struct{ name, key string }
	seen := map[pair]bool{}
	for _, s := range page {
		p := pair{s.Name, s.Key}
		if seen[p] || !s.CreatedAt.Before(cutoff) || !s.ExpiresAt.After(now) {
			continue
		}
		seen[p] = true
		bms, err := e.store.FindBookmarks(ctx, s.Name, s.Key)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("finding the bookmarks of a queued stimulus", "stimulus", s.ID, "err", err)
			}
			return
		}
		for _, b := range bms {
			e.log.InfoContext(ctx, "a queued stimulus matches a bookmark set after it; queueing the instance", "stimulus", s.ID, "instance", b.InstanceID)
			e.push(ctx, itemOf(b.InstanceID, reasonStimulus, b.Order))
		}
	}
}

// reasonSwept is the queue reason of an instance the recovery sweep
// found waiting (its inbox, or its first run) too long: a worker runs it
// only when its lock is free (process's onlyIfFree), since a run that
// holds the lock reads the inbox before it ends. Its value is "inbox", as
// nodes of earlier versions wrote and read it.
const reasonSwept = "inbox"

// reasonStimulus is the queue reason of an instance woken by a stimulus.
const reasonStimulus = "stimulus"

// pushSoon queues an instance from inside an execution, waiting at most a
// moment for room: a worker that blocked on a full queue could wait for
// itself. An item it could not queue is found by the recovery sweep.
func (e *Engine) pushSoon(ctx context.Context, it queue.Item) {
	ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := e.queue.Push(ctx, it); err != nil {
		e.log.InfoContext(ctx, "could not queue the instance now; the recovery sweep will", "instance", it.InstanceID, "err", err)
	}
}

// itemRead is the queue item of work of instance id that a sweep found
// by id alone (a lease expired, a wake-up lost): the instance is read for
// its order, which these rare cases can afford; one that cannot be read
// goes in the default order, and its run finds what became of it.
func (e *Engine) itemRead(ctx context.Context, id, reason string) queue.Item {
	it, _ := e.readItem(ctx, id, reason)
	return it
}

// readItem is itemRead, also returning the instance it read (nil when it
// could not), for a caller that logs about it.
func (e *Engine) readItem(ctx context.Context, id, reason string) (queue.Item, *weft.Instance) {
	in, err := e.store.GetInstance(ctx, id)
	if err != nil {
		if ctx.Err() == nil && !errors.Is(err, weft.ErrNotFound) {
			e.log.WarnContext(ctx, "reading the order of an instance to queue", "instance", id, "err", err)
		}
		return itemOf(id, reason, weft.Order{}), nil
	}
	return itemOf(id, reason, in.Order), in
}

// sweepStimuli moves stimuli whose TTL ended without a bookmark to the dead
// letters, and lets the store forget old delivered ones.
func (e *Engine) sweepStimuli(ctx context.Context) {
	dead, err := e.store.ExpireStimuli(ctx, e.cfg.Now(), 1000)
	if err != nil && ctx.Err() == nil {
		e.log.Warn("expiring stimuli", "err", err)
	}
	for _, s := range dead {
		e.log.Info("stimulus found no bookmark before its TTL; moved to the dead letters", "stimulus", s.ID, "name", s.Name, "key", s.Key)
	}
}
