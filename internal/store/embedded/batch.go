package embedded

import (
	"errors"
	"slices"
	"sync"
)

// batcher groups concurrent writes into one read-write transaction and one
// fsync (group commit) without a delay: a write that finds no transaction
// committing commits at once, alone; writes that arrive while one commits
// join the next batch, which commits as soon as that one ends. A lone
// writer pays only its own fsync, and under load a batch holds every write
// that arrived during the previous commit, so batches grow with the load
// and the fsync time. A batch holds maxSize writes at most (the next ones
// start another), and a write whose function returns an error is taken out
// and run alone while the others are retried without it, as bolt.DB.Batch
// does.
//
// It stands in for DB.Batch for two reasons. Batch makes the first write of
// a batch wait a fixed delay for others, which a lone writer pays on every
// commit. And Batch commits on a goroutine of its own (its timer's, or one
// it starts for a full batch), and reruns a failed function on the caller's
// goroutine without recovering. bbolt panics on corrupt pages, in the
// functions or in the commit (a rebalance reading a sibling page, a
// freelist freeing a page twice); from those goroutines the panic kills the
// process, as no recover of ours is on them. Here every transaction runs on
// the goroutine of one of its writers (a batch's first, its leader), under
// update's recover.
type batcher struct {
	maxSize int
	// update runs one transaction under recover (Store.update).
	update func(fn func(kvTx) error) error

	mu sync.Mutex
	// busy is set while a batch commits; waiting are the batches queued
	// behind it, oldest first. Only the last accepts writes, until full.
	busy    bool
	waiting []*batch
}

type batch struct {
	calls []call
	// turn is closed when the batch may commit: the one before it ended.
	turn chan struct{}
}

type call struct {
	fn   func(kvTx) error
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
func (b *batcher) run(fn func(kvTx) error) error {
	c := call{fn: fn, done: make(chan result, 1)}
	var lead *batch
	b.mu.Lock()
	if !b.busy {
		b.busy = true
		lead = &batch{calls: []call{c}}
	} else {
		n := len(b.waiting)
		if n == 0 || len(b.waiting[n-1].calls) >= b.maxSize {
			lead = &batch{turn: make(chan struct{})}
			b.waiting = append(b.waiting, lead)
			n++
		}
		bt := b.waiting[n-1]
		bt.calls = append(bt.calls, c)
	}
	b.mu.Unlock()
	if lead != nil {
		if lead.turn != nil {
			<-lead.turn
		}
		// Out of waiting since its turn came: no write joins it now.
		b.mu.Lock()
		calls := lead.calls
		b.mu.Unlock()
		b.commit(calls)
		b.handOver()
	}
	r := <-c.done
	if r.solo {
		return b.update(fn)
	}
	return r.err
}

// handOver gives the turn to the oldest waiting batch, or ends the busy
// spell when none waits.
func (b *batcher) handOver() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiting) == 0 {
		b.busy = false
		return
	}
	next := b.waiting[0]
	b.waiting[0] = nil
	b.waiting = b.waiting[1:]
	close(next.turn)
}

// commit runs calls in one transaction and tells each its result.
func (b *batcher) commit(calls []call) {
	for len(calls) > 0 {
		failed := -1
		err := b.update(func(tx kvTx) error {
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
