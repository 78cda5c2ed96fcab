package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftworks/weft/internal/heartbeat"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/plugins/call"
)

// ErrLeaseLost is why an execution stops when the heartbeat scheduler finds
// its instance's store lease or lock lost (expired, or taken over by
// another execution): it writes nothing more.
var ErrLeaseLost = errors.New("engine: instance lease lost")

// attempt is an activity attempt the heartbeat scheduler watches.
type attempt struct {
	x        *execution
	instance string
	token    string
	number   int
	hb       *call.Heartbeat
	timeout  time.Duration
	timedOut atomic.Bool
	mu       sync.Mutex
	details  []byte
}

// renewer connects the engine to the heartbeat scheduler: it renews what the
// scheduler asks it to and carries out its actions.
//
// Items are named after the execution (execution.key: the instance and its
// lock's token), never the instance alone: an execution that lost its lock
// and the one that took the instance over on the same node keep apart.
type renewer struct {
	e        *Engine
	attempts sync.Map // item id → *attempt
	runs     sync.Map // lease and lock item id → *execution
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
func (b *renewer) Renew(ctx context.Context, batch []heartbeat.Renewal) []heartbeat.Outcome {
	out := make([]heartbeat.Outcome, len(batch))
	e := b.e
	r := store.LeaseRenewal{Node: e.cfg.NodeID, Boot: e.boot, Expiry: e.cfg.Now().Add(e.cfg.LockTTL)}
	var locks []int                    // batch indexes of the instance locks
	var leases []int                   // of the instance leases renewed
	beat := map[int]*attempt{}         // of the attempts whose details go out
	unleased := map[*execution][]int{} // attempts whose instance has no lease yet
	for i, rn := range batch {
		switch rn.Kind {
		case heartbeat.LockLease:
			locks = append(locks, i)
		case heartbeat.InstanceLease:
			v, ok := b.runs.Load(rn.ID)
			if !ok {
				out[i] = heartbeat.NotFound // the execution ended meanwhile
				continue
			}
			r.IDs = append(r.IDs, v.(*execution).inst.ID)
			leases = append(leases, i)
		case heartbeat.Activity:
			v, ok := b.attempts.Load(rn.ID)
			if !ok {
				out[i] = heartbeat.NotFound
				continue
			}
			a := v.(*attempt)
			out[i] = heartbeat.OK
			if !a.x.sched.held.Load() {
				unleased[a.x] = append(unleased[a.x], i)
				continue
			}
			if rn.Changed && rn.Details != nil {
				beat[i] = a
			}
		default:
			out[i] = heartbeat.OK
		}
	}
	// Locks and leases first: a slow commit below must not make them late.
	b.extendLocks(ctx, batch, locks, out)
	b.renewLeases(ctx, r, batch, leases, beat, out)

	// Then the executions whose instance has no lease yet commit it as
	// running, all at once; their details follow in a second round trip.
	if len(unleased) == 0 {
		return out
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	persisted := map[int]*attempt{}
	for x, idx := range unleased {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := x.persistNow(ctx)
			mu.Lock()
			defer mu.Unlock()
			for _, i := range idx {
				if err != nil {
					out[i] = heartbeat.Error // retried within the cycle
					continue
				}
				if rn := batch[i]; rn.Changed && rn.Details != nil {
					v, _ := b.attempts.Load(rn.ID)
					if a, ok := v.(*attempt); ok {
						persisted[i] = a
					}
				}
			}
		}()
	}
	wg.Wait()
	b.renewLeases(ctx, store.LeaseRenewal{Node: r.Node, Boot: r.Boot, Expiry: r.Expiry}, batch, nil, persisted, out)
	return out
}

// renewLeases renews the leases r.IDs (at the batch indexes leases) and
// stores the details of the attempts beat (by batch index) in one store
// call, and writes the outcomes: a lease the store did not renew was
// superseded; a failed call is retried, details included.
func (b *renewer) renewLeases(ctx context.Context, r store.LeaseRenewal, batch []heartbeat.Renewal, leases []int, beat map[int]*attempt, out []heartbeat.Outcome) {
	for i, a := range beat {
		rn := batch[i]
		r.Heartbeats = append(r.Heartbeats, store.Heartbeat{
			InstanceID: a.instance, Token: a.token, Attempt: a.number, Details: rn.Details, Time: rn.LastBeat,
		})
	}
	if len(r.IDs) == 0 && len(r.Heartbeats) == 0 {
		return
	}
	renewed, err := b.e.store.RenewLeases(ctx, r)
	if err != nil {
		for _, i := range leases {
			out[i] = heartbeat.Error // retried within the cycle
		}
		for i := range beat {
			out[i] = heartbeat.Error // so that the details are sent again
		}
		return
	}
	ok := make(map[string]bool, len(renewed))
	for _, id := range renewed {
		ok[id] = true
	}
	for j, i := range leases {
		out[i] = heartbeat.Superseded
		if ok[r.IDs[j]] {
			out[i] = heartbeat.OK
		}
	}
}

// extendLocks extends the instance locks at the batch indexes idx and
// writes their outcomes: a lock that is no longer held (lock.ErrLost) was
// superseded, and its execution must stop writing; anything else is
// retried.
func (b *renewer) extendLocks(ctx context.Context, batch []heartbeat.Renewal, idx []int, out []heartbeat.Outcome) {
	if len(idx) == 0 {
		return
	}
	leases := make([]lock.Lease, 0, len(idx))
	runs := make([]*execution, 0, len(idx))
	at := make([]int, 0, len(idx))
	for _, i := range idx {
		v, ok := b.runs.Load(batch[i].ID)
		if !ok {
			out[i] = heartbeat.NotFound // released meanwhile
			continue
		}
		x := v.(*execution)
		leases = append(leases, x.lease)
		runs = append(runs, x)
		at = append(at, i)
	}
	start := b.e.cfg.Now()
	errs := lock.ExtendAll(ctx, b.e.locks, leases, b.e.cfg.LockTTL)
	now := b.e.cfg.Now()
	for j, i := range at {
		x := runs[j]
		switch err := errs[j]; {
		case err == nil:
			out[i] = heartbeat.OK
			x.sched.lockUntil.Store(start.Add(b.e.cfg.LockTTL).UnixNano())
		case errors.Is(err, lock.ErrLost), now.UnixNano() >= x.sched.lockUntil.Load():
			// Lost, or over by this node's clock while the backend could
			// not be reached: another node may hold it now, so the
			// execution must stop either way.
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
	case x.sched.persist <- done:
	case <-x.sched.exited:
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
func (b *renewer) holdLock(x *execution) {
	id := lockPrefix + x.sched.key
	b.runs.Store(id, x)
	if _, err := b.e.scheduler.Track(heartbeat.Item{ID: id, Kind: heartbeat.LockLease, TTL: b.e.cfg.LockTTL}); err != nil {
		x.logAt(slog.LevelWarn, "tracking lock", "err", err)
	}
}

func (b *renewer) releaseLock(x *execution) {
	b.e.scheduler.Untrack(lockPrefix + x.sched.key)
	b.runs.Delete(lockPrefix + x.sched.key)
}

// HeartbeatTimeout implements heartbeat.Actions: the attempt is failed as a
// heartbeat timeout with its last details, and its guest stopped.
func (b *renewer) HeartbeatTimeout(_ context.Context, it heartbeat.Item, details []byte, _ time.Time) {
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
func (b *renewer) CancelActivity(_ context.Context, it heartbeat.Item, _ heartbeat.Outcome) {
	if v, ok := b.attempts.Load(it.ID); ok {
		v.(*attempt).hb.RequestCancel()
	}
}

// LeaseLost implements heartbeat.Actions: the execution whose store lease
// or lock was lost stops, leaving the instance to whoever holds it now.
func (b *renewer) LeaseLost(_ context.Context, it heartbeat.Item, why heartbeat.Outcome) {
	v, ok := b.runs.Load(it.ID)
	if !ok {
		return // it ended meanwhile
	}
	x := v.(*execution)
	what := "instance lease lost"
	if it.Kind == heartbeat.LockLease {
		what = "instance lock lost"
	}
	x.sched.lost.Store(true)
	x.logAt(slog.LevelWarn, what, "token", x.lease.Token(), "outcome", why)
	select {
	case x.wake <- struct{}{}:
	default: // already woken
	}
}

// holdLease tracks a running instance's store lease; releaseLease stops.
func (b *renewer) holdLease(x *execution) {
	id := leasePrefix + x.sched.key
	b.runs.Store(id, x)
	if _, err := b.e.scheduler.Track(heartbeat.Item{ID: id, Kind: heartbeat.InstanceLease, TTL: b.e.cfg.LockTTL}); err != nil {
		x.logAt(slog.LevelWarn, "tracking lease", "err", err)
	}
}

func (b *renewer) releaseLease(x *execution) {
	b.e.scheduler.Untrack(leasePrefix + x.sched.key)
	b.runs.Delete(leasePrefix + x.sched.key)
}

func attemptItem(instance, token string) string { return "attempt:" + instance + "/" + token }

// watch tracks an attempt, reading its signs of life from pulse.
func (b *renewer) watch(id string, a *attempt, pulse heartbeat.Pulse) {
	b.attempts.Store(id, a)
	warns, err := b.e.scheduler.Track(heartbeat.Item{ID: id, Kind: heartbeat.Activity, HeartbeatTimeout: a.timeout, Pulse: pulse})
	if err != nil {
		a.x.logAt(slog.LevelWarn, "tracking attempt", "item", id, "attempt", a.number, "err", err)
	}
	for _, w := range warns {
		a.x.logAt(slog.LevelWarn, "heartbeat scheduler", "item", id, "attempt", a.number, "warning", w.Message)
	}
}

// forget stops tracking an attempt and returns it.
func (b *renewer) forget(id string) *attempt {
	v, ok := b.attempts.LoadAndDelete(id)
	if !ok {
		return nil
	}
	b.e.scheduler.Untrack(id)
	return v.(*attempt)
}
