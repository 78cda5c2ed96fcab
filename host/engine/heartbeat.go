package engine

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftworks/weft/host/heartbeat"
	"github.com/weftworks/weft/plugins"
)

// ErrLeaseLost is why an execution stops when the heartbeat scheduler finds
// that the store no longer renews its instance's lease (it expired, or
// another node took the instance over).
var ErrLeaseLost = errors.New("engine: instance lease lost")

// attempt is an activity attempt the heartbeat scheduler watches.
type attempt struct {
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
	lost     sync.Map // instance id → true: its lease was lost
}

// Renew implements heartbeat.Renewer: the instance leases of a batch are
// renewed in one store transaction (RenewLeases); a lease the store did not
// renew was lost (expired, or taken over). Attempts need no renewal in the
// embedded store: their details are persisted when they end.
func (b *beats) Renew(ctx context.Context, batch []heartbeat.Renewal) []heartbeat.Outcome {
	out := make([]heartbeat.Outcome, len(batch))
	var ids []string
	for i, r := range batch {
		switch r.Kind {
		case heartbeat.InstanceLease:
			ids = append(ids, strings.TrimPrefix(r.ID, leasePrefix))
		default:
			out[i] = heartbeat.OK
			if _, ok := b.attempts.Load(r.ID); !ok {
				out[i] = heartbeat.NotFound
			}
		}
	}
	if len(ids) == 0 {
		return out
	}
	e := b.e
	renewed, err := e.store.RenewLeases(ctx, e.cfg.NodeID, e.boot, ids, e.cfg.Now().Add(e.cfg.LockTTL))
	if err != nil {
		for i, r := range batch {
			if r.Kind == heartbeat.InstanceLease {
				out[i] = heartbeat.Error // retried within the cycle
			}
		}
		return out
	}
	ok := make(map[string]bool, len(renewed))
	for _, id := range renewed {
		ok[id] = true
	}
	for i, r := range batch {
		if r.Kind == heartbeat.InstanceLease {
			out[i] = heartbeat.Superseded
			if ok[strings.TrimPrefix(r.ID, leasePrefix)] {
				out[i] = heartbeat.OK
			}
		}
	}
	return out
}

const leasePrefix = "instance:"

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
// instance stops, leaving it to whoever holds it now.
func (b *beats) LeaseLost(_ context.Context, it heartbeat.Item, why heartbeat.Outcome) {
	id := strings.TrimPrefix(it.ID, leasePrefix)
	b.lost.Store(id, true)
	b.e.log.Warn("instance lease lost", "instance", id, "outcome", why)
	b.e.mu.Lock()
	wake := b.e.running[id]
	b.e.mu.Unlock()
	if wake != nil {
		select {
		case wake <- struct{}{}:
		default:
		}
	}
}

// holdLease tracks a running instance's lease; releaseLease stops.
func (b *beats) holdLease(id string) {
	b.lost.Delete(id)
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
