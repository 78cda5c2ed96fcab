package boltstore

import (
	"errors"
	"slices"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
)

// batcher groups concurrent writes into one read-write transaction and one
// fsync (group commit) with bolt.DB.Batch's rules: the first write of a
// batch waits up to maxDelay for others, a batch of maxSize commits at
// once, and a write whose function returns an error is taken out and run
// alone while the others are retried without it.
//
// It stands in for DB.Batch for one reason: Batch commits on a goroutine
// of its own (its timer's, or one it starts for a full batch), and reruns a
// failed function on the caller's goroutine without recovering. bbolt
// panics on corrupt pages, in the functions or in the commit (a rebalance
// reading a sibling page, a freelist freeing a page twice); from those
// goroutines the panic kills the process, as no recover of ours is on
// them. Here every transaction runs on the goroutine of one of its writers
// (a batch's first, its leader), under update's recover.
type batcher struct {
	maxDelay time.Duration
	maxSize  int
	// update runs one transaction under recover (Store.update).
	update func(fn func(*bolt.Tx) error) error

	mu   sync.Mutex
	open *batch // the batch accepting writes; nil when none is
}

type batch struct {
	calls []call
	full  chan struct{} // closed when calls reached maxSize
}

type call struct {
	fn   func(*bolt.Tx) error
	done chan result // buffered: the leader never waits on it
}

// result is what a batch tells a write: its error, or that it must run
// alone.
type result struct {
	err  error
	solo bool
}

// run runs fn in a batch and returns once the batch is durable or failed.
// fn may run more than once.
func (b *batcher) run(fn func(*bolt.Tx) error) error {
	c := call{fn: fn, done: make(chan result, 1)}
	b.mu.Lock()
	bt := b.open
	lead := bt == nil
	if lead {
		bt = &batch{full: make(chan struct{})}
		b.open = bt
	}
	bt.calls = append(bt.calls, c)
	if len(bt.calls) >= b.maxSize {
		b.open = nil
		close(bt.full)
	}
	b.mu.Unlock()
	if lead {
		t := time.NewTimer(b.maxDelay)
		select {
		case <-t.C:
		case <-bt.full:
		}
		t.Stop()
		b.mu.Lock()
		if b.open == bt {
			b.open = nil
		}
		calls := bt.calls // closed to appends from here on
		b.mu.Unlock()
		b.commit(calls)
	}
	r := <-c.done
	if r.solo {
		return b.update(fn)
	}
	return r.err
}

// commit runs calls in one transaction and tells each its result.
func (b *batcher) commit(calls []call) {
	for len(calls) > 0 {
		failed := -1
		err := b.update(func(tx *bolt.Tx) error {
			for i, c := range calls {
				if err := c.fn(tx); err != nil {
					failed = i
					return err
				}
			}
			return nil
		})
		// A panic breaks the store, which refuses every write from then
		// on: the others would not commit without the failed one either.
		if failed >= 0 && !errors.Is(err, ErrBroken) {
			calls[failed].done <- result{solo: true}
			calls = slices.Delete(calls, failed, failed+1)
			continue
		}
		for _, c := range calls {
			c.done <- result{err: err}
		}
		return
	}
}
