// Package queue is the ready queue: runnable work ("instance X has something
// to do") that every node of a cluster pulls from, so that adding a node adds
// capacity even when every request reaches one node (with the engine's
// EagerStarts off: with it on, a start runs on the node that took it while
// that node has an idle worker).
//
// # Decisions
//
//   - An Item names an instance, not an event. The events themselves
//     (activity results, due timers, queued stimuli) are in the store; a
//     worker that pops an item takes the instance's lock and processes all
//     of them. So pushes for an instance that is already queued coalesce
//     into one item, and the queue's size is bounded by the number of
//     instances with work, not by the number of events.
//   - Delivery is at least once: a popped item is Acked when it has been
//     handled. The in-process queue loses its content with the process,
//     which is safe: recovery finds the same work in the store (expired
//     leases, due timers, pending stimuli). The Redis queue redelivers an
//     item a dead node had popped but not acked.
//   - Push waits while the queue is full (backpressure) until its context
//     ends, but fairly: a lane (a priority and a fairness key) with few
//     items queued is admitted past a full queue, up to twice its
//     capacity (see [Admits]), so that one tenant's backlog does not
//     hold another tenant's work at the door.
package queue

import (
	"context"
	"errors"
)

// Item is work for some node.
type Item struct {
	// InstanceID names the instance to run.
	InstanceID string `json:"instance_id"`
	// Reason says why, for logs and metrics: "start", "resume", "timer",
	// "stimulus", "recovery".
	Reason string `json:"reason"`
	// Priority orders the queue: 1 is handed out first, 5 last; 0 is the
	// default, 3. Values outside 1…5 are clamped (internal/queue/fair).
	Priority int `json:"priority,omitempty"`
	// Key is the fairness key (a tenant): within a priority, the keys
	// with queued items take turns, each up to Weight items a turn (0 is
	// 1); within a key, first in, first out. Items without a key share
	// the key "".
	Key    string `json:"key,omitempty"`
	Weight int    `json:"weight,omitempty"`
}

// Delivery is a popped item.
type Delivery interface {
	Item() Item
	// Ack marks the item handled. Acking twice is harmless.
	Ack(ctx context.Context) error
}

// Queue is a ready queue. It hands items out in the order of
// internal/queue/fair: by priority, then round-robin across fairness keys,
// then first in, first out; a pushed item's order is that of its first
// push while it is queued (a later push of the same instance coalesces
// into it, changing nothing).
type Queue interface {
	// Push adds item unless an item for the same instance is already
	// queued (not yet popped), which is decided first, whatever the
	// queue holds. Otherwise it waits until [Admits] admits item, or
	// until ctx ends: with C the capacity, a push is admitted while the
	// queue holds fewer than C items, or while item's lane (its
	// priority and fairness key, as normalised by internal/queue/fair)
	// holds fewer than [FairShare](C) items and the queue fewer than
	// 2×C. At the in-process default of C = 10,000 a lane's fair share
	// is 100, and the queue never holds more than 20,000 items. A
	// waiting push is admitted as soon as pops make the rule hold for
	// it; waiting pushes of different lanes need not be admitted in the
	// order they came.
	Push(ctx context.Context, item Item) error
	// Pop waits for an item until ctx ends.
	Pop(ctx context.Context) (Delivery, error)
	// Depth returns the number of queued items, for metrics.
	Depth(ctx context.Context) (int, error)
}

// FairShare is the number of items a lane may hold and still be admitted
// past a full queue of the given capacity: max(1, capacity/100), so 100
// at a capacity of 10,000 and 1 below a capacity of 200. It is small next
// to the capacity, so that the queue's bound stays 2×capacity even with
// every lane at its share, and at least 1, so that a lane with nothing
// queued is never held back by others' backlog.
func FairShare(capacity int) int { return max(1, capacity/100) }

// Admits is the backpressure rule of every Queue: whether a Push is
// admitted into a queue of the given capacity that holds queued items, of
// which lane are in the pushed item's lane (its priority and fairness
// key). A full queue admits the items of a lane below its [FairShare],
// up to 2×capacity, so that the backlog of one lane cannot hold up
// another lane's first items; a lane at its share waits for room as any
// push did before.
func Admits(capacity, queued, lane int) bool {
	return queued < capacity || (lane < FairShare(capacity) && queued < 2*capacity)
}

// ErrClosed is returned by a closed queue.
var ErrClosed = errors.New("queue: closed")
