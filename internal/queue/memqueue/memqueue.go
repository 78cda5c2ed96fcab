// Package memqueue is the in-process ready queue of embedded mode: a bounded
// FIFO with coalescing by instance and backpressure.
package memqueue

import (
	"context"
	"sync"

	"github.com/weftworks/weft/internal/queue"
)

// Queue is an in-process queue.Queue. It is safe for concurrent use.
type Queue struct {
	items chan queue.Item

	mu     sync.Mutex
	queued map[string]bool
}

// New returns a queue that holds at most capacity items (at least 1).
func New(capacity int) *Queue {
	return &Queue{items: make(chan queue.Item, max(1, capacity)), queued: map[string]bool{}}
}

// Push implements queue.Queue.
func (q *Queue) Push(ctx context.Context, item queue.Item) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	q.mu.Lock()
	if q.queued[item.InstanceID] {
		q.mu.Unlock()
		return nil
	}
	q.queued[item.InstanceID] = true
	q.mu.Unlock()
	select {
	case q.items <- item:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		delete(q.queued, item.InstanceID)
		q.mu.Unlock()
		return ctx.Err()
	}
}

// Pop implements queue.Queue. The instance counts as queued until Pop
// returns, so that a Push racing with it is covered by the popped item,
// whose handling has not started yet.
func (q *Queue) Pop(ctx context.Context) (queue.Delivery, error) {
	select {
	case item := <-q.items:
		q.mu.Lock()
		delete(q.queued, item.InstanceID)
		q.mu.Unlock()
		return delivery{item}, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Depth implements queue.Queue.
func (q *Queue) Depth(context.Context) (int, error) { return len(q.items), nil }

type delivery struct{ item queue.Item }

func (d delivery) Item() queue.Item { return d.item }

// Ack implements queue.Delivery; an in-process item needs none.
func (delivery) Ack(context.Context) error { return nil }
