// Package memqueue is the in-process ready queue of embedded mode: a bounded
// queue in the order of internal/queue/fair (priority, then round-robin
// across fairness keys, then first in, first out), with coalescing by
// instance and backpressure.
//
// # Backpressure
//
// A Push waits while the queue is full, by the rule of [queue.Admits]:
// with C the capacity, a push is admitted while the queue holds fewer than
// C items, or while the item's lane (its priority and fairness key) holds
// fewer than [queue.FairShare](C) = max(1, C/100) items and the queue
// fewer than 2×C. At the host's default capacity of 10,000, a tenant with
// fewer than 100 items queued at a priority gets in whatever another
// tenant's backlog, and the queue never holds more than 20,000 items. A
// push for an instance already queued coalesces before any of this, so it
// never waits.
//
// Waiting pushes sleep on one channel that a pop closes when pushes wait
// (pops alone make room, and a pop may make room for any lane), and each
// looks again under the lock: a push of a short lane that waited at 2×C
// is admitted by the first pop, while one of a lane at its share waits on
// until the queue holds fewer than C items or its lane fewer than its
// share. The rule costs one map lookup more than a full-queue check, and
// only when the queue holds C items or more.
package memqueue

import (
	"context"
	"sync"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/fair"
)

// Queue is an in-process queue.Queue. It is safe for concurrent use.
type Queue struct {
	capacity int

	mu    sync.Mutex
	order fair.Order
	// items are the queued items by instance, as first pushed: the
	// coalescing check, and what a Pop hands out.
	items map[string]queue.Item
	// pushed is closed when an item is pushed while Pops wait on it, and
	// popped when one is popped while Pushes wait for room; each is then
	// replaced. The waiters look again under mu.
	pushed, popped          chan struct{}
	popWaiters, pushWaiters int
}

// New returns a queue whose Push waits at capacity items (at least 1),
// but for the lanes below their fair share: it holds at most 2×capacity
// items (see the package doc).
func New(capacity int) *Queue {
	return &Queue{
		capacity: max(1, capacity), items: map[string]queue.Item{},
		pushed: make(chan struct{}), popped: make(chan struct{}),
	}
}

// Push implements queue.Queue: it waits, until ctx ends, while
// queue.Admits refuses item (see the package doc), and returns ctx.Err()
// if it ends first.
func (q *Queue) Push(ctx context.Context, item queue.Item) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.mu.Lock()
		if _, ok := q.items[item.InstanceID]; ok {
			q.mu.Unlock()
			return nil
		}
		if q.admits(item) {
			q.items[item.InstanceID] = item
			q.order.Push(fair.Entry{ID: item.InstanceID, Priority: item.Priority, Key: item.Key, Weight: item.Weight})
			if q.popWaiters > 0 {
				close(q.pushed)
				q.pushed = make(chan struct{})
			}
			q.mu.Unlock()
			return nil
		}
		q.pushWaiters++
		room := q.popped
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
		}
		q.mu.Lock()
		q.pushWaiters--
		q.mu.Unlock()
	}
}

// admits applies queue.Admits to item; the caller holds mu. The lane is
// looked up only when the queue is full, the rare case.
func (q *Queue) admits(item queue.Item) bool {
	n := len(q.items)
	if n < q.capacity {
		return true
	}
	lane, _ := q.order.Lane(item.Priority, item.Key)
	return queue.Admits(q.capacity, n, lane.Queued)
}

// Pop implements queue.Queue. The instance counts as queued until Pop
// returns, so that a Push racing with it is covered by the popped item,
// whose handling has not started yet.
func (q *Queue) Pop(ctx context.Context) (queue.Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.mu.Lock()
		if e, ok := q.order.Pop(); ok {
			item := q.items[e.ID]
			delete(q.items, e.ID)
			if q.pushWaiters > 0 {
				close(q.popped)
				q.popped = make(chan struct{})
			}
			q.mu.Unlock()
			return delivery{item}, nil
		}
		q.popWaiters++
		more := q.pushed
		q.mu.Unlock()
		select {
		case <-more:
		case <-ctx.Done():
		}
		q.mu.Lock()
		q.popWaiters--
		q.mu.Unlock()
	}
}

// Depth implements queue.Queue.
func (q *Queue) Depth(context.Context) (int, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items), nil
}

type delivery struct{ item queue.Item }

func (d delivery) Item() queue.Item { return d.item }

// Ack implements queue.Delivery; an in-process item needs none.
func (delivery) Ack(context.Context) error { return nil }
