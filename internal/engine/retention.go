package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/definition"
	"github.com/weftworks/weft/internal/store"
)

// Retention: the commit that finishes an instance stamps it with the time
// it may be deleted (weft.Instance.DeleteAfter), from its workflow
// version's retention or the engine's; the store indexes the stamp, and a
// singleton sweep deletes the instances whose time came. Deciding at the
// finish, rather than in the sweep, keeps the sweep free of per-workflow
// logic, and a later change of either retention does not rewrite what was
// decided for instances that finished already (Temporal keeps a closed
// workflow's retention alike).

// deleteAfter is when an instance of def that finished at finished may be
// deleted: finished plus the workflow's retention when it sets one, the
// engine's otherwise; the zero time (kept forever) when that is 0.
func (e *Engine) deleteAfter(def *definition.Definition, finished time.Time) time.Time {
	r := e.cfg.Retention
	if def.Retention != nil {
		r = *def.Retention
	}
	if r <= 0 {
		return time.Time{}
	}
	return finished.Add(r)
}

// sweepRetention deletes the finished instances whose DeleteAfter has
// passed, asking s (the store, or one of its sweep stripes) for
// RetentionBatch at a time, again while
// batches come back full and it deletes some of each, until half the
// singleton lock's TTL has passed (the next node's turn must not overlap
// this one) or ctx ends.
func (e *Engine) sweepRetention(ctx context.Context, s store.Store) {
	start := e.cfg.Now()
	stop := start.Add(singletonTTL(e.cfg.RetentionInterval) / 2)
	total := 0
	defer func() {
		if total > 0 {
			e.cfg.Observer.InstancesDeleted(DeletedByRetention, total)
			e.log.Info("deleted finished instances past their retention", "count", total)
		}
	}()
	for {
		now := e.cfg.Now()
		ids, err := s.ExpiredInstances(ctx, now, e.cfg.RetentionBatch)
		if err != nil {
			if ctx.Err() == nil {
				e.log.Warn("finding instances past their retention", "err", err)
			}
			return
		}
		deleted := 0
		for _, id := range ids {
			ok, err := e.expire(ctx, id, now)
			if err != nil {
				if ctx.Err() != nil {
					return
				}
				e.log.WarnContext(ctx, "deleting an instance past its retention; the next turn tries again", "instance", id, "err", err)
				continue
			}
			if ok {
				deleted++
				total++
			}
		}
		// A short batch was the last; a batch of which nothing could be
		// deleted (every instance busy) would come back the same.
		if len(ids) < e.cfg.RetentionBatch || deleted == 0 || ctx.Err() != nil || e.cfg.Now().After(stop) {
			return
		}
	}
}

// expire deletes instance id, found past its DeleteAfter at now, under
// its lock and with the lock's fencing token, as Delete does. It checks
// again, under the lock, that the instance is still finished and expired:
// an import may have replaced it since the index was read. It reports
// whether it deleted the instance; one whose lock is held (a delete
// request, a worker settling its inbox) is left for the next turn.
func (e *Engine) expire(ctx context.Context, id string, now time.Time) (bool, error) {
	lease, ok, err := e.locks.TryAcquire(ctx, InstanceLockKey(id), e.cfg.LockTTL)
	if err != nil {
		return false, fmt.Errorf("locking instance %s: %w", id, err)
	}
	if !ok {
		return false, nil
	}
	defer lease.Release(context.WithoutCancel(ctx))
	inst, err := e.store.GetInstance(ctx, id)
	switch {
	case errors.Is(err, weft.ErrNotFound):
		return false, nil // deleted meanwhile
	case err != nil:
		return false, err
	case !inst.Status.Terminal() || inst.DeleteAfter.IsZero() || inst.DeleteAfter.After(now):
		return false, nil
	}
	// A failed instance someone asked to retry is kept: the retry, once
	// applied, makes it run again.
	if retry, err := e.reopenWaiting(ctx, inst); err != nil || retry {
		return false, err
	}
	err = e.store.DeleteInstance(ctx, id, lease.Token())
	if errors.Is(err, weft.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("deleting instance %s: %w", id, err)
	}
	e.changed(id)
	return true, nil
}
