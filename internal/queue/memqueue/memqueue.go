// Package memqueue is the in-process ready queue of embedded mode: a bounded
// queue in the order of internal/queue/fair (priority, then round-robin
// across fairness keys, then first in, first out), with coalescing by
// instance and backpressure.
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

// New returns a queue that holds at most capacity items (at least 1).
func New(capacity int) *Queue {
	return &Queue{
		capacity: max(1, capacity), items: map[string]queue.Item{},
		pushed: make(chan struct{}), popped: make(chan struct{}),
	}
}

// Push implements queue.Queue.
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
		if len(q.items) < q.capacity {
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
