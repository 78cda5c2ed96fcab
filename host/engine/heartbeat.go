package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/weftworks/weft/host/heartbeat"
	"github.com/weftworks/weft/plugins"
)

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
}

// Renew implements heartbeat.Renewer. Attempts need no renewal in the
// embedded store: their details are persisted when they end, and the
// instance's lease is renewed with its lock.
func (b *beats) Renew(_ context.Context, batch []heartbeat.Renewal) []heartbeat.Outcome {
	out := make([]heartbeat.Outcome, len(batch))
	for i, r := range batch {
		out[i] = heartbeat.OK
		if _, ok := b.attempts.Load(r.ID); !ok {
			out[i] = heartbeat.NotFound
		}
	}
	return out
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

// LeaseLost implements heartbeat.Actions; the engine tracks no leases with
// the scheduler yet.
func (b *beats) LeaseLost(context.Context, heartbeat.Item, heartbeat.Outcome) {}

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
