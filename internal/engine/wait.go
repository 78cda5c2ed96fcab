package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Waiting for an instance: local waiters, woken by this node's commits and, in a cluster, by the bus.

// Wait returns the instance once it is no longer pending or running
// (suspended or finished), or when ctx ends. Instances run by this node wake
// their waiters at once; others are polled.
//
// # Notes
//
// Instances run by other nodes wake the wait through the Bus when one is
// configured; polling is the fallback for a lost notification, every 50ms
// at first and less often the longer the wait, up to once a second, so
// that many long waits do not read the store twenty times a second each.
func (e *Engine) Wait(ctx context.Context, id string) (*weft.Instance, error) {
	return e.waitFor(ctx, id, stopped, nil)
}

// WaitFinished is Wait until the instance completed, failed or was
// cancelled.
func (e *Engine) WaitFinished(ctx context.Context, id string) (*weft.Instance, error) {
	return e.waitFor(ctx, id, weft.Status.Terminal, nil)
}

// stopped is what Wait waits for: the instance neither pending nor running.
func stopped(s weft.Status) bool { return s != weft.StatusPending && s != weft.StatusRunning }

// A Watch is a wait for one instance registered before the instance could
// change (StartWatched): its first look needs no read of the store.
type Watch struct {
	e    *Engine
	id   string
	ch   chan *weft.Instance
	inst *weft.Instance // as Start returned it
	used bool
}

// watch registers a Watch of instance id.
func (e *Engine) watch(id string) *Watch {
	return &Watch{e: e, id: id, ch: e.addWaiter(id)}
}

// addWaiter registers a channel that the next wake of instance id sends
// to.
func (e *Engine) addWaiter(id string) chan *weft.Instance {
	ch := make(chan *weft.Instance, 1)
	e.mu.Lock()
	e.waiters[id] = append(e.waiters[id], ch)
	e.mu.Unlock()
	return ch
}

// Wait is Engine.Wait from the Watch's registration on. A Watch waits
// once.
func (w *Watch) Wait(ctx context.Context) (*weft.Instance, error) {
	w.used = true
	return w.e.waitFor(ctx, w.id, stopped, w)
}

// WaitFinished is Engine.WaitFinished from the Watch's registration on. A
// Watch waits once.
func (w *Watch) WaitFinished(ctx context.Context) (*weft.Instance, error) {
	w.used = true
	return w.e.waitFor(ctx, w.id, weft.Status.Terminal, w)
}

// Stop unregisters a Watch that was not waited on; after a wait it does
// nothing.
func (w *Watch) Stop() {
	if !w.used {
		w.used = true
		w.e.unwait(w.id, w.ch)
	}
}

// The bounds of Wait's fallback poll: see Wait.
const (
	firstPoll = 50 * time.Millisecond
	maxPoll   = time.Second
)

// waitFor waits until done is true of the instance's status. From a Watch
// (first), its first look is at the instance the Watch was given.
func (e *Engine) waitFor(ctx context.Context, id string, done func(weft.Status) bool, first *Watch) (*weft.Instance, error) {
	poll := firstPoll
	for {
		var ch chan *weft.Instance
		var inst *weft.Instance
		if first != nil {
			ch, inst = first.ch, first.inst
			first = nil
			if done(inst.Status) {
				e.unwait(id, ch)
				return inst, nil
			}
		} else {
			ch = e.addWaiter(id)
			var err error
			inst, err = e.store.GetInstance(ctx, id)
			if err != nil || done(inst.Status) {
				e.unwait(id, ch)
				return inst, err
			}
		}
		t := time.NewTimer(poll)
		select {
		case now := <-ch:
			t.Stop()
			// A commit on this node hands over the instance as it
			// stored it; the bus only names it.
			if now != nil && done(now.Status) {
				return now, nil
			}
		case <-t.C:
			poll = min(2*poll, maxPoll)
			e.unwait(id, ch)
		case <-ctx.Done():
			t.Stop()
			e.unwait(id, ch)
			return inst, ctx.Err()
		}
	}
}

func (e *Engine) unwait(id string, ch chan *weft.Instance) {
	e.mu.Lock()
	defer e.mu.Unlock()
	list := e.waiters[id]
	for i, c := range list {
		if c == ch {
			list = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(list) == 0 {
		delete(e.waiters, id)
	} else {
		e.waiters[id] = list
	}
}

// subscribe listens to the other nodes' notifications.
func (e *Engine) subscribe(ctx context.Context) (stop func(), err error) {
	inbox, err := e.cfg.Bus.Subscribe(ctx, topicInbox, func(id []byte) { e.wakeExecution(string(id)) })
	if err != nil {
		return nil, fmt.Errorf("engine: subscribing to %s: %w", topicInbox, err)
	}
	changed, err := e.cfg.Bus.Subscribe(ctx, topicChanged, func(id []byte) {
		e.wake(string(id), nil)
		e.changed(string(id))
	})
	if err != nil {
		inbox()
		return nil, fmt.Errorf("engine: subscribing to %s: %w", topicChanged, err)
	}
	return func() { inbox(); changed() }, nil
}

// publish tells the other nodes, when there are any.
func (e *Engine) publish(ctx context.Context, topic, id string) {
	if e.cfg.Bus == nil {
		return
	}
	if err := e.cfg.Bus.Publish(context.WithoutCancel(ctx), topic, []byte(id)); err != nil {
		e.log.DebugContext(ctx, "publishing", "topic", topic, "instance", id, "err", err)
	}
}

// wake wakes the Wait calls of instance id after a commit, handing over
// inst, the instance as committed, when it is known (nil: the waiters read
// it). Every waiter gets inst itself: they only read it.
func (e *Engine) wake(id string, inst *weft.Instance) {
	e.mu.Lock()
	list := e.waiters[id]
	delete(e.waiters, id)
	e.mu.Unlock()
	for _, ch := range list {
		ch <- inst // buffered, one send per channel
	}
}
