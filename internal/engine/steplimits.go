package engine

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/runner"
	"github.com/weftworks/weft/internal/slots"
)

// Step limits (docs/flow-control.md, "Step limits"): an activity step's
// `concurrency: {key, limit}` bounds its attempts running at once per key,
// and its `rate_limit: {key, limit, per, burst}` spaces their starts. The
// runner evaluates the keys and puts them on the Invoke; the execution
// starts an attempt only within both, and otherwise defers it
// (runner.ActivityDeferred): a durable timer, so that the instance waits
// without a worker, and the wait counts toward no timeout but the step's
// schedule-to-close. Keys are shared by value across steps and workflows.
//
// A step's slot belongs to its attempt (holder: runner.StepSlot.Holder),
// under a lease as long as the attempt may run (its start-to-close
// timeout) and a lock's TTL: it is given back when the attempt ends, when
// the runner abandons it (a cancelled step's deferred attempt, an attempt
// in flight on a node that died, as the instance is recovered after its
// lease's TTL), and otherwise its lease runs out; never earlier.

// RateLimiter keeps the budgets of rate limits by key; internal/ratelimit's
// limiters implement it.
type RateLimiter interface {
	// Reserve takes the next event of key under l if it may happen within
	// maxWait from now, and says how long to wait for it (0: at once).
	// When the wait would be longer, it takes nothing and returns ok false
	// with the wait it would have had.
	Reserve(ctx context.Context, key string, l ratelimit.Limit, maxWait time.Duration) (wait time.Duration, ok bool, err error)
}

// stepSlotKey is the store's key of a step concurrency key's slots.
func stepSlotKey(key string) string { return "step/" + key }

// StepRateKeyPrefix starts the limiter's key of every step rate limit's
// budget, as plugins.HostRateKeyPrefix starts the host rules': the two
// share the node's limiter.
const StepRateKeyPrefix = "step/"

// stepRateKey is the limiter's key of a step rate limit's budget.
func stepRateKey(key string) string { return StepRateKeyPrefix + key }

// Deferral terms.
const (
	// inlineRateWait is the longest rate-limit wait an attempt spends in
	// its execution (started late) rather than deferred durably: a commit
	// and a timer cost more than a short wait.
	inlineRateWait = 250 * time.Millisecond
	// slotRecheck is when an attempt waiting for a step slot looks again
	// should the wake-up of its turn be lost: its turn queues its instance,
	// which starts it at once (startPromoted).
	slotRecheck = 5 * time.Minute
	// maxRateWait bounds a rate-limit reservation of a step without a
	// schedule-to-close: a turn further away than that is refused, and
	// the attempt deferred that long asks again.
	maxRateWait = 24 * time.Hour
)

// gate decides whether the attempt of inv starts now: it reserves its
// rate limit's turn and acquires its step's slot. It returns the delay
// before the attempt's start (a short rate-limit wait), or a deferral
// (ok false), or an error that fails the attempt (the limiter or the store
// failed: the attempt is retried like any host failure).
func (x *execution) gate(inv runner.Invoke) (delay time.Duration, d runner.ActivityDeferred, ok bool, err error) {
	now := x.e.cfg.Now()
	d = runner.ActivityDeferred{Token: inv.Token}
	if r := inv.Rate; r != nil && inv.Resumed != runner.DeferredRateLimit {
		maxWait := maxRateWait
		if !inv.Deadline.IsZero() {
			maxWait = max(inv.Deadline.Sub(now), 0)
		}
		wait, granted, err := x.e.cfg.Limiter.Reserve(x.ctx, stepRateKey(r.Key), r.Limit, maxWait)
		if err != nil {
			return 0, d, false, fmt.Errorf("rate limit %q: %w", r.Key, err)
		}
		switch {
		case !granted:
			// Not before the deadline (or maxRateWait): the attempt waits
			// for the deadline, and then fails on it (or asks again).
			d.Until, d.Reason, d.Key = now.Add(maxWait), runner.DeferredRateLimit, r.Key
			return 0, d, false, nil
		case wait > inlineRateWait:
			d.Until, d.Reason, d.Key = now.Add(wait), runner.DeferredRateLimit, r.Key
			return 0, d, false, nil
		}
		delay = wait
	}
	if s := inv.Slot; s != nil {
		dec, err := x.e.store.UpdateSlots(x.ctx, stepSlotKey(s.Key), s.Holder, x.stepSlotParams(s.Limit, inv.Timeout), now, slots.Acquire)
		if err != nil {
			return 0, d, false, fmt.Errorf("concurrency key %q: %w", s.Key, err)
		}
		x.e.stepSlotsDecided(x.ctx, dec)
		if dec.Outcome != slots.Granted {
			d.Until, d.Reason, d.Key = now.Add(slotRecheck), runner.DeferredConcurrency, s.Key
			return 0, d, false, nil
		}
	}
	return delay, d, true, nil
}

// stepSlotParams are the terms of a step's concurrency limit: a slot is
// held as long as its attempt may run, and a lock's TTL more, so that only
// an attempt whose node died lets its lease run out.
func (x *execution) stepSlotParams(limit int, timeout time.Duration) slots.Params {
	if timeout == 0 {
		timeout = x.e.cfg.ActivityTimeout
	}
	return slots.Params{Limit: limit, Policy: slots.Queue, Lease: timeout + x.e.cfg.LockTTL}
}

// releaseStepSlot gives back an attempt's slot, or its place in the line.
// A failure is logged, with logCtx: the slot's lease returns it.
func (e *Engine) releaseStepSlot(ctx, logCtx context.Context, key, holder string, limit int) {
	p := slots.Params{Limit: max(limit, 1), Policy: slots.Queue, Lease: e.cfg.LockTTL}
	dec, err := e.store.UpdateSlots(context.WithoutCancel(ctx), stepSlotKey(key), holder, p, e.cfg.Now(), slots.Release)
	if err != nil {
		attrs := []any{"holder", holder, "key", key, "err", err}
		if id, ok := runner.HolderInstance(holder); ok {
			attrs = append(attrs, "instance", id)
		}
		e.log.WarnContext(logCtx, "giving back a step's concurrency slot; its lease will", attrs...)
		return
	}
	e.stepSlotsDecided(ctx, dec)
}

// stepSlotsDecided queues the instances of the attempts promoted: their
// execution starts them (startPromoted).
func (e *Engine) stepSlotsDecided(ctx context.Context, d slots.Decision) {
	for _, g := range d.Promoted {
		if id, ok := runner.HolderInstance(g.ID); ok {
			e.pushSoon(ctx, e.itemRead(ctx, id, reasonSlot))
		}
	}
}

// startPromoted starts at once the deferred attempts of the instance whose
// turn for a step slot has come: their timers are a fallback for a lost
// wake-up. Each is asked for its slot (a holder is granted again); those
// granted fire their timer now.
func (x *execution) startPromoted() {
	if len(x.timers) == 0 {
		return // most executions: no deferred attempt to look for
	}
	for _, ds := range x.prog.DeferredSlots(x.st, x.inst.ID) {
		if _, armed := x.timers[ds.Timer]; !armed {
			continue
		}
		dec, err := x.e.store.UpdateSlots(x.ctx, stepSlotKey(ds.Key), ds.Holder, x.stepSlotParams(ds.Limit, 0), x.e.cfg.Now(), slots.Acquire)
		if err != nil {
			x.logAt(slog.LevelWarn, "asking for a step's concurrency slot", "key", ds.Key, "err", err)
			return
		}
		x.e.stepSlotsDecided(x.ctx, dec)
		if dec.Outcome == slots.Granted {
			// Its Invoke asks again, as a holder: granted, with the lease
			// of its step's timeout.
			delete(x.timers, ds.Timer)
			x.apply(runner.TimerFired{Token: ds.Timer})
		}
	}
}
