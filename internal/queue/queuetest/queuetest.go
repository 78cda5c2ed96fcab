// Package queuetest is the conformance suite every queue.Queue
// implementation passes.
package queuetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/fair"
)

// Exercise runs the suite; newQueue returns an empty queue with room for at
// least capacity items and at most capacity+1 (backends round up).
func Exercise(t *testing.T, newQueue func(t *testing.T, capacity int) queue.Queue) {
	t.Helper()
	item := func(id string) queue.Item { return queue.Item{InstanceID: id, Reason: "test"} }
	pop := func(t *testing.T, q queue.Queue) queue.Item {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		d, err := q.Pop(ctx)
		if err != nil {
			t.Fatalf("Pop: %v", err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatalf("Ack: %v", err)
		}
		return d.Item()
	}

	t.Run("fifo", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 10)
		ctx := context.Background()
		for _, id := range []string{"a", "b", "c"} {
			if err := q.Push(ctx, item(id)); err != nil {
				t.Fatal(err)
			}
		}
		for _, want := range []string{"a", "b", "c"} {
			if got := pop(t, q); got.InstanceID != want {
				t.Fatalf("popped %s, want %s", got.InstanceID, want)
			}
		}
	})
	t.Run("pushes for a queued instance coalesce", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 10)
		ctx := context.Background()
		for _, id := range []string{"a", "a", "b", "a"} {
			if err := q.Push(ctx, item(id)); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := q.Depth(ctx); err != nil || n != 2 {
			t.Fatalf("Depth = %d, %v; want 2", n, err)
		}
		pop(t, q)
		// Popped: a new push queues it again.
		if err := q.Push(ctx, item("a")); err != nil {
			t.Fatal(err)
		}
		if n, _ := q.Depth(ctx); n != 2 {
			t.Fatalf("Depth after re-push = %d, want 2", n)
		}
	})
	t.Run("pop waits for a push", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 10)
		got := make(chan string, 1)
		go func() {
			d, err := q.Pop(context.Background())
			if err != nil {
				got <- err.Error()
				return
			}
			got <- d.Item().InstanceID
		}()
		if err := q.Push(context.Background(), item("late")); err != nil {
			t.Fatal(err)
		}
		select {
		case id := <-got:
			if id != "late" {
				t.Fatalf("popped %s", id)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Pop did not return after a Push")
		}
	})
	t.Run("pop returns ctx.Err", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 10)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if _, err := q.Pop(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Pop on an empty queue: %v, want DeadlineExceeded", err)
		}
	})
	t.Run("push waits while full", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 2)
		ctx := context.Background()
		n := 0
		// Fill it, whatever the backend rounds to. A push that fits gets
		// time to spare on a loaded machine; only the push that finds the
		// queue full waits its whole second.
		for ; n < 10; n++ {
			short, cancel := context.WithTimeout(ctx, time.Second)
			err := q.Push(short, item(fmt.Sprint("fill", n)))
			cancel()
			if errors.Is(err, context.DeadlineExceeded) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if n < 2 || n > 3 {
			t.Fatalf("accepted %d items with capacity 2", n)
		}
		done := make(chan error, 1)
		go func() { done <- q.Push(ctx, item("waiting")) }()
		pop(t, q)
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("Push did not proceed after a Pop made room")
		}
		// The item that timed out is not queued: pushing it again works.
		seen := map[string]bool{}
		for i := 0; i < n; i++ {
			seen[pop(t, q).InstanceID] = true
		}
		if !seen["waiting"] {
			t.Fatalf("popped %v, want the waiting item among them", seen)
		}
	})
	t.Run("priority order", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 10)
		pushAll(t, q, []queue.Item{
			{InstanceID: "a", Priority: 3}, {InstanceID: "b", Priority: 1}, {InstanceID: "c", Priority: 5},
			{InstanceID: "d"}, {InstanceID: "e", Priority: 1},
		})
		wantPops(t, q, pop, "b e a d c")
	})
	t.Run("round-robin across keys", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 10)
		pushAll(t, q, []queue.Item{
			{InstanceID: "x1", Key: "x"}, {InstanceID: "x2", Key: "x"}, {InstanceID: "x3", Key: "x"},
			{InstanceID: "y1", Key: "y"}, {InstanceID: "z1", Key: "z"}, {InstanceID: "z2", Key: "z"},
		})
		wantPops(t, q, pop, "x1 y1 z1 x2 z2 x3")
	})
	t.Run("weights", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 10)
		pushAll(t, q, []queue.Item{
			{InstanceID: "x1", Key: "x", Weight: 2}, {InstanceID: "x2", Key: "x", Weight: 2},
			{InstanceID: "x3", Key: "x", Weight: 2}, {InstanceID: "x4", Key: "x", Weight: 2},
			{InstanceID: "y1", Key: "y"}, {InstanceID: "y2", Key: "y"}, {InstanceID: "y3", Key: "y"},
		})
		wantPops(t, q, pop, "x1 x2 y1 x3 x4 y2 y3")
	})
	t.Run("a coalesced push keeps the first push's order", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 10)
		pushAll(t, q, []queue.Item{
			{InstanceID: "a", Priority: 4, Key: "k"}, {InstanceID: "b", Priority: 4},
			{InstanceID: "a", Priority: 1, Key: "other"},
		})
		got := pop(t, q)
		if want := (queue.Item{InstanceID: "a", Reason: "test", Priority: 4, Key: "k"}); got != want {
			t.Fatalf("popped %+v, want %+v", got, want)
		}
		wantPops(t, q, pop, "b")
	})
	t.Run("order matches fair.Order", func(t *testing.T) {
		t.Parallel()
		q := newQueue(t, 200)
		var model fair.Order
		rng := rand.New(rand.NewPCG(35, 1))
		keys := []string{"", "a", "b", "c", "d"}
		for i := range 600 {
			if rng.IntN(3) > 0 || model.Len() == 0 {
				it := queue.Item{
					InstanceID: fmt.Sprint("i", rng.IntN(150)), Reason: "test",
					Priority: rng.IntN(6), Key: keys[rng.IntN(len(keys))], Weight: rng.IntN(4),
				}
				if model.Len() >= 150 {
					continue // stay below the capacity: Push would wait
				}
				model.Push(fair.Entry{ID: it.InstanceID, Priority: it.Priority, Key: it.Key, Weight: it.Weight})
				if err := q.Push(context.Background(), it); err != nil {
					t.Fatalf("step %d: Push(%+v): %v", i, it, err)
				}
				continue
			}
			want, _ := model.Pop()
			if got := pop(t, q); got.InstanceID != want.ID {
				t.Fatalf("step %d: popped %s, the fair order pops %s", i, got.InstanceID, want.ID)
			}
		}
		for model.Len() > 0 {
			want, _ := model.Pop()
			if got := pop(t, q); got.InstanceID != want.ID {
				t.Fatalf("draining: popped %s, the fair order pops %s", got.InstanceID, want.ID)
			}
		}
	})
	t.Run("FairBackpressure", func(t *testing.T) {
		t.Parallel()
		// A share of 1 (8/100 rounds down), and of 2.
		for _, capacity := range []int{8, 200} {
			t.Run(fmt.Sprint("capacity=", capacity), func(t *testing.T) {
				t.Parallel()
				fairBackpressure(t, newQueue(t, capacity), capacity, pop)
			})
		}
	})
	t.Run("hammer: every item is delivered", func(t *testing.T) {
		t.Parallel()
		// Over 7 lanes, so that pushes are admitted past a full queue too;
		// never more than 2×capacity queued (capacity 9 if rounded up).
		const capacity, lanes = 8, 7
		q := newQueue(t, capacity)
		const producers, perProducer, consumers = 4, 50, 3
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var mu sync.Mutex
		got := map[string]int{}
		var cwg sync.WaitGroup
		stop := make(chan struct{})
		for c := 0; c < consumers; c++ {
			cwg.Add(1)
			go func() {
				defer cwg.Done()
				for {
					pctx, pcancel := context.WithTimeout(ctx, 100*time.Millisecond)
					d, err := q.Pop(pctx)
					pcancel()
					if err != nil {
						select {
						case <-stop:
							return
						default:
							continue
						}
					}
					mu.Lock()
					got[d.Item().InstanceID]++
					mu.Unlock()
					_ = d.Ack(ctx)
					if n, err := q.Depth(ctx); err == nil && n > 2*(capacity+1) {
						t.Errorf("Depth = %d with capacity %d, want at most twice the capacity", n, capacity)
					}
				}
			}()
		}
		var pwg sync.WaitGroup
		for p := 0; p < producers; p++ {
			pwg.Add(1)
			go func(p int) {
				defer pwg.Done()
				for i := 0; i < perProducer; i++ {
					it := item(fmt.Sprintf("p%d-%d", p, i))
					it.Key = fmt.Sprint("k", (p*perProducer+i)%lanes)
					if err := q.Push(ctx, it); err != nil {
						t.Error(err)
						return
					}
				}
			}(p)
		}
		pwg.Wait()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			n := len(got)
			mu.Unlock()
			if n == producers*perProducer || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond) // polling with a deadline
		}
		close(stop)
		cwg.Wait()
		if len(got) != producers*perProducer {
			t.Fatalf("%d distinct items delivered, want %d", len(got), producers*perProducer)
		}
	})
}

// pushAll pushes items in order (Reason "test" where it is empty).
func pushAll(t *testing.T, q queue.Queue, items []queue.Item) {
	t.Helper()
	for _, it := range items {
		if it.Reason == "" {
			it.Reason = "test"
		}
		if err := q.Push(context.Background(), it); err != nil {
			t.Fatalf("Push(%+v): %v", it, err)
		}
	}
}

// wantPops pops as many items as want names (space-separated) and
// requires those, in that order.
func wantPops(t *testing.T, q queue.Queue, pop func(*testing.T, queue.Queue) queue.Item, want string) {
	t.Helper()
	var got []string
	for range strings.Fields(want) {
		got = append(got, pop(t, q).InstanceID)
	}
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("popped %s, want %s", g, want)
	}
}

// fairBackpressure fills a queue of the given capacity with lane "a" and
// checks queue.Admits's rule, spelled out here: with C the capacity the
// queue admits, a push is admitted while the queue holds fewer than C
// items, or while its lane holds fewer than max(1, C/100) and the queue
// fewer than 2×C. A pusher of "a" waits from the start; "b" gets its fair
// share at once and its next push waits; other lanes fill the queue to
// 2×C, where a new lane's push waits too. Then every pop, in the fair
// order (a fair.Order is the model), admits exactly the waiting pushes
// that the rule admits, as soon as it does.
func fairBackpressure(t *testing.T, q queue.Queue, capacity int, pop func(*testing.T, queue.Queue) queue.Item) {
	t.Helper()
	var model fair.Order
	item := func(lane string, i int) queue.Item {
		return queue.Item{InstanceID: fmt.Sprintf("%s-%d", lane, i), Reason: "test", Key: lane}
	}
	depth := func() int {
		t.Helper()
		n, err := q.Depth(context.Background())
		if err != nil {
			t.Fatalf("Depth: %v", err)
		}
		return n
	}
	// admitted pushes it, and requires it not to wait (a push that waits
	// would reach the deadline).
	admitted := func(it queue.Item) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := q.Push(ctx, it); err != nil {
			t.Fatalf("Push(%s) with %d queued: %v, want it admitted", it.InstanceID, model.Len(), err)
		}
		model.Push(fair.Entry{ID: it.InstanceID, Key: it.Key})
	}
	// waits requires a push of it to wait until its deadline, and leave
	// the queue as it was.
	waits := func(it queue.Item) {
		t.Helper()
		before := depth()
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		if err := q.Push(ctx, it); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Push(%s) with %d queued: %v, want it to wait", it.InstanceID, before, err)
		}
		if n := depth(); n != before {
			t.Fatalf("Depth after a push that waited = %d, want %d", n, before)
		}
	}

	// Fill lane a until a push waits, whatever the backend rounds the
	// capacity to. A push that fits gets time to spare on a loaded
	// machine; only the one that finds the queue full waits its second.
	c := 0
	for ; c <= capacity+1; c++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := q.Push(ctx, item("a", c))
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		model.Push(fair.Entry{ID: item("a", c).InstanceID, Key: "a"})
	}
	if c < capacity || c > capacity+1 || depth() != c {
		t.Fatalf("lane a alone: %d pushes admitted (Depth %d) with capacity %d", c, depth(), capacity)
	}
	share := max(1, c/100)
	admits := func(lane string) bool {
		l, _ := model.Lane(0, lane)
		return model.Len() < c || (l.Queued < share && model.Len() < 2*c)
	}

	// The waiting pushers report here, each once, when their push returns.
	type result struct {
		it  queue.Item
		err error
	}
	results := make(chan result, 3)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel) // before the queue closes: no pusher outlives the test
	waiting := map[string]queue.Item{}
	wait := func(it queue.Item) {
		waiting[it.Key] = it
		go func() { results <- result{it, q.Push(ctx, it)} }()
	}
	// noneReturned requires every waiting pusher to be waiting still.
	noneReturned := func(when string) {
		t.Helper()
		select {
		case r := <-results:
			t.Fatalf("%s: Push(%s) returned %v with %d queued, want it to wait", when, r.it.InstanceID, r.err, depth())
		default:
		}
	}
	wait(item("a", c))

	// An instance already queued coalesces before any capacity check.
	admitted(item("a", 0))
	if n := depth(); n != c {
		t.Fatalf("Depth after a coalesced push = %d, want %d", n, c)
	}
	// Lane b gets its fair share at once, past the full queue; no more.
	for i := range share {
		admitted(item("b", i))
	}
	waits(item("b", share))
	noneReturned("lane b at its share")
	// Other lanes fill the queue to 2×C, where even a new lane waits.
	for l := 0; model.Len() < 2*c; l++ {
		for i := 0; i < share && model.Len() < 2*c; i++ {
			admitted(item(fmt.Sprint("k", l), i))
		}
	}
	if n := depth(); n != 2*c {
		t.Fatalf("Depth with every lane at its share = %d, want %d", n, 2*c)
	}
	waits(item("z", 0))
	noneReturned("the queue at 2×C")
	wait(item("b", share))
	wait(item("z", 0))

	// Pop in the fair order; after each pop, the waiting pushes that the
	// rule admits are admitted, one at a time, and no other.
	deadline := 30 * time.Second
	for model.Len() > 0 || len(waiting) > 0 {
		for {
			var can []string
			for lane := range waiting {
				if admits(lane) {
					can = append(can, lane)
				}
			}
			if len(can) == 0 {
				break
			}
			select {
			case r := <-results:
				if r.err != nil {
					t.Fatalf("Push(%s): %v", r.it.InstanceID, r.err)
				}
				if !admits(r.it.Key) {
					t.Fatalf("Push(%s) admitted with %d queued; the rule admits only lanes %v", r.it.InstanceID, model.Len(), can)
				}
				delete(waiting, r.it.Key)
				model.Push(fair.Entry{ID: r.it.InstanceID, Key: r.it.Key})
			case <-time.After(deadline):
				t.Fatalf("no waiting push admitted within %s with %d queued; the rule admits lanes %v", deadline, model.Len(), can)
			}
		}
		if n := depth(); n != model.Len() || n > 2*c {
			t.Fatalf("Depth = %d, want %d (at most 2×%d)", n, model.Len(), c)
		}
		if model.Len() == 0 {
			t.Fatalf("the queue is empty and pushes of lanes %v still wait", waiting)
		}
		noneReturned("before a pop")
		want, _ := model.Pop()
		if got := pop(t, q); got.InstanceID != want.ID {
			t.Fatalf("popped %s, the fair order pops %s", got.InstanceID, want.ID)
		}
	}
}
