package embedded

import (
	"errors"
	"sync"
	"testing"
	"time"
)

// txLog is a fake transaction runner for the batcher: it records which
// writes each transaction ran, and holds the first transaction until
// release is closed.
type txLog struct {
	mu      sync.Mutex
	txs     [][]int
	started chan struct{} // closed when the first transaction started
	release chan struct{}
	first   bool
}

func newTxLog() *txLog {
	return &txLog{started: make(chan struct{}), release: make(chan struct{})}
}

func (l *txLog) update(fn func(kvTx) error) error {
	l.mu.Lock()
	first := !l.first
	l.first = true
	l.txs = append(l.txs, nil)
	l.mu.Unlock()
	if first {
		close(l.started)
		<-l.release
	}
	return fn(nil)
}

// write returns a batch function that records its number in the current
// transaction, failing with err.
func (l *txLog) write(n int, err error) func(kvTx) error {
	return func(kvTx) error {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.txs[len(l.txs)-1] = append(l.txs[len(l.txs)-1], n)
		return err
	}
}

// TestBatcherGroupsWritesArrivingDuringACommit: a lone write commits at
// once, alone; the writes that arrive while it commits share the next
// transaction, up to maxSize each; a failing write runs alone and fails
// alone.
func TestBatcherGroupsWritesArrivingDuringACommit(t *testing.T) {
	l := newTxLog()
	b := &batcher{maxSize: 3, update: l.update}
	errBad := errors.New("bad write")

	errs := make(chan error, 8)
	go func() { errs <- b.run(l.write(0, nil)) }()
	<-l.started // the first write commits without waiting for company
	var wg sync.WaitGroup
	for n := 1; n <= 5; n++ {
		var err error
		if n == 2 {
			err = errBad
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- b.run(l.write(n, err))
		}()
	}
	// All five are queued behind the first transaction before it ends.
	deadline := time.Now().Add(time.Minute)
	for {
		b.mu.Lock()
		queued := 0
		for _, bt := range b.waiting {
			queued += len(bt.calls)
		}
		b.mu.Unlock()
		if queued == 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want 5", queued)
		}
		time.Sleep(time.Millisecond)
	}
	close(l.release)
	wg.Wait()
	if err := <-errs; err != nil {
		t.Fatalf("first write: %v", err)
	}
	failed := 0
	for range 5 {
		if err := <-errs; errors.Is(err, errBad) {
			failed++
		} else if err != nil {
			t.Errorf("write: %v", err)
		}
	}
	if failed != 1 {
		t.Errorf("%d writes failed, want the bad one only", failed)
	}

	// Transactions: {0}; then the first waiting batch of 3 (with the bad
	// write, which fails it), retried without it, and the bad write alone;
	// then the second batch of 2. Which writes joined which batch depends
	// on their arrival order; the sizes do not.
	l.mu.Lock()
	defer l.mu.Unlock()
	committed := map[int]int{}
	var sizes []int
	for _, tx := range l.txs {
		sizes = append(sizes, len(tx))
	}
	if len(l.txs[0]) != 1 || l.txs[0][0] != 0 {
		t.Errorf("first transaction ran %v, want [0] alone", l.txs[0])
	}
	for i, tx := range l.txs {
		if len(tx) > 3 {
			t.Errorf("transaction %d ran %d writes, above maxSize 3", i, len(tx))
		}
		for _, n := range tx {
			committed[n]++
		}
	}
	if len(l.txs) != 5 {
		t.Errorf("%d transactions (sizes %v), want 5: the first, a batch of 3 failed by the bad write, "+
			"its retry without it, the bad write alone, the batch of 2", len(l.txs), sizes)
	}
	for n := 0; n <= 5; n++ {
		if committed[n] == 0 {
			t.Errorf("write %d never ran", n)
		}
	}
}
