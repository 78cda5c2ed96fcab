package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftworks/weft/host/heartbeat"
	"github.com/weftworks/weft/host/store"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/plugins"
)

// ErrLeaseLost is why an execution stops when the heartbeat scheduler finds
// that the store no longer renews its instance's lease (it expired, or
// another node took the instance over).
var ErrLeaseLost = errors.New("engine: instance lease lost")

// attempt is an activity attempt the heartbeat scheduler watches.
type attempt struct {
	x        *execution
	instance string
	token    string
	number   int
	hb       *plugins.Heartbeat
	timeout  time.Duration
	timedOut atomic.Bool
	mu       sync.Mutex
	details  []byte
}

// beats connects the engine to the heartbeat scheduler: it renews what the
// scheduler asks it to and carries out its actions.
type beats struct {
	e        *Engine
	attempts sync.Map // item id → *attempt
	locks    sync.Map // item id → lock.Lease: instance locks held by executions
	lost     sync.Map // instance id → true: its lease or lock was lost
}

// Renew implements heartbeat.Renewer. A batch is one store transaction
// (RenewLeases): the instance leases it holds are renewed, and the latest
// details of its attempts whose guests heartbeated since the last renewal
// are stored with them, so that they survive this node. A lease the store
// did not renew was lost (expired, or taken over).
//
// An attempt whose instance has no lease yet — lazy persistence commits
// only when the instance suspends or ends — first has its execution commit
// the instance as running: an activity that outlives the first visit of
// the scheduler (a cycle at most) becomes recoverable by any node, and its
// details storable.
func (b *beats) Renew(ctx context.Context, batch []heartbeat.Renewal) []heartbeat.Outcome {
	out := make([]heartbeat.Outcome, len(batch))
	e := b.e
	r := store.LeaseRenewal{Node: e.cfg.NodeID, Boot: e.boot, Expiry: e.cfg.Now().Add(e.cfg.LockTTL)}
	var stored []int // batch indexes of the attempts whose details go out
	var locks []int  // batch indexes of the instance locks
	for i, rn := range batch {
		switch rn.Kind {
		case heartbeat.LockLease:
			locks = append(locks, i)
		case heartbeat.InstanceLease:
			r.IDs = append(r.IDs, strings.TrimPrefix(rn.ID, leasePrefix))
		case heartbeat.Activity:
			v, ok := b.attempts.Load(rn.ID)
			if !ok {
				out[i] = heartbeat.NotFound
				continue
			}
			a := v.(*attempt)
			if !a.x.held.Load() {
				if err := a.x.persistNow(ctx); err != nil {
					out[i] = heartbeat.Error // retried within the cycle
					continue
				}
			}
			out[i] = heartbeat.OK
			if rn.Changed && rn.Details != nil {
				r.Heartbeats = append(r.Heartbeats, store.Heartbeat{
					InstanceID: a.instance, Token: a.token, Attempt: a.number, Details: rn.Details, Time: rn.LastBeat,
				})
				stored = append(stored, i)
			}
		default:
			out[i] = heartbeat.OK
		}
	}
	b.extendLocks(ctx, batch, locks, out)
	if len(r.IDs) == 0 && len(r.Heartbeats) == 0 {
		return out
	}
	renewed, err := e.store.RenewLeases(ctx, r)
	if err != nil {
		for i, rn := range batch {
			if rn.Kind == heartbeat.InstanceLease {
				out[i] = heartbeat.Error // retried within the cycle
			}
		}
		for _, i := range stored {
			out[i] = heartbeat.Error // so that the details are sent again
		}
		return out
	}
	ok := make(map[string]bool, len(renewed))
	for _, id := range renewed {
		ok[id] = true
	}
	for i, rn := range batch {
		if rn.Kind == heartbeat.InstanceLease {
			out[i] = heartbeat.Superseded
			if ok[strings.TrimPrefix(rn.ID, leasePrefix)] {
				out[i] = heartbeat.OK
			}
		}
	}
	return out
}

// extendLocks extends the instance locks at the batch indexes idx and
// writes their outcomes: a lock that is no longer held (lock.ErrLost) was
// superseded, and its execution must stop writing; anything else is
// retried.
func (b *beats) extendLocks(ctx context.Context, batch []heartbeat.Renewal, idx []int, out []heartbeat.Outcome) {
	if len(idx) == 0 {
		return
	}
	leases := make([]lock.Lease, 0, len(idx))
	at := make([]int, 0, len(idx))
	for _, i := range idx {
		v, ok := b.locks.Load(batch[i].ID)
		if !ok {
			out[i] = heartbeat.NotFound // released meanwhile
			continue
		}
		leases = append(leases, v.(lock.Lease))
		at = append(at, i)
	}
	errs := lock.ExtendAll(ctx, b.e.locks, leases, b.e.cfg.LockTTL)
	for j, i := range at {
		switch err := errs[j]; {
		case err == nil:
			out[i] = heartbeat.OK
		case errors.Is(err, lock.ErrLost):
			out[i] = heartbeat.Superseded
		default:
			out[i] = heartbeat.Error
		}
	}
}

// persistNow asks the execution to commit its instance as running, with a
// lease, unless it has done so; it returns once the commit is durable.
func (x *execution) persistNow(ctx context.Context) error {
	done := make(chan error, 1)
	select {
	case x.persist <- done:
	case <-x.exited:
		return fmt.Errorf("instance %s: execution ended", x.inst.ID)
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

const (
	leasePrefix = "instance:"
	lockPrefix  = "lock:"
)

// holdLock has the scheduler extend an execution's instance lock;
// releaseLock stops.
func (b *beats) holdLock(id string, l lock.Lease) {
	b.lost.Delete(id)
	b.locks.Store(lockPrefix+id, l)
	if _, err := b.e.beats.Track(heartbeat.Item{ID: lockPrefix + id, Kind: heartbeat.LockLease, TTL: b.e.cfg.LockTTL}); err != nil {
		b.e.log.Warn("tracking lock", "instance", id, "err", err)
	}
}

func (b *beats) releaseLock(id string) {
	b.e.beats.Untrack(lockPrefix + id)
	b.locks.Delete(lockPrefix + id)
}

// HeartbeatTimeout implements heartbeat.Actions: the attempt is failed as a
// heartbeat timeout with its last details, and its guest stopped.
func (b *beats) HeartbeatTimeout(_ context.Context, it heartbeat.Item, details []byte, _ time.Time) {
	v, ok := b.attempts.Load(it.ID)
	if !ok {
		return
	}
	a := v.(*attempt)
	a.mu.Lock()
	a.details = details
	a.mu.Unlock()
	a.timedOut.Store(true)
	a.hb.RequestCancel()
}

// CancelActivity implements heartbeat.Actions.
func (b *beats) CancelActivity(_ context.Context, it heartbeat.Item, _ heartbeat.Outcome) {
	if v, ok := b.attempts.Load(it.ID); ok {
		v.(*attempt).hb.RequestCancel()
	}
}

// LeaseLost implements heartbeat.Actions: the execution running the
// instance — whose store lease or lock was lost — stops, leaving it to
// whoever holds it now.
func (b *beats) LeaseLost(_ context.Context, it heartbeat.Item, why heartbeat.Outcome) {
	id, what := strings.TrimPrefix(it.ID, leasePrefix), "instance lease lost"
	if it.Kind == heartbeat.LockLease {
		id, what = strings.TrimPrefix(it.ID, lockPrefix), "instance lock lost"
	}
	b.lost.Store(id, true)
	b.e.log.Warn(what, "instance", id, "outcome", why)
	b.e.wakeExecution(id)
}

// holdLease tracks a running instance's lease; releaseLease stops.
func (b *beats) holdLease(id string) {
	if _, err := b.e.beats.Track(heartbeat.Item{ID: leasePrefix + id, Kind: heartbeat.InstanceLease, TTL: b.e.cfg.LockTTL}); err != nil {
		b.e.log.Warn("tracking lease", "instance", id, "err", err)
	}
}

func (b *beats) releaseLease(id string) {
	b.e.beats.Untrack(leasePrefix + id)
	b.lost.Delete(id)
}

// leaseLost reports whether the scheduler found an instance's lease lost.
func (b *beats) leaseLost(id string) bool {
	_, lost := b.lost.Load(id)
	return lost
}

func attemptItem(instance, token string) string { return "attempt:" + instance + "/" + token }

// watch tracks an attempt with a heartbeat timeout.
func (b *beats) watch(id string, a *attempt) {
	b.attempts.Store(id, a)
	warns, err := b.e.beats.Track(heartbeat.Item{ID: id, Kind: heartbeat.Activity, HeartbeatTimeout: a.timeout, Pulse: a.hb})
	if err != nil {
		b.e.log.Warn("tracking attempt", "attempt", id, "err", err)
	}
	for _, w := range warns {
		b.e.log.Warn("heartbeat scheduler", "attempt", id, "warning", w.Message)
	}
}

// forget stops tracking an attempt and returns it.
func (b *beats) forget(id string) *attempt {
	v, ok := b.attempts.LoadAndDelete(id)
	if !ok {
		return nil
	}
	b.e.beats.Untrack(id)
	return v.(*attempt)
}
