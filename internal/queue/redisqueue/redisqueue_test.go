package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/queuetest"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// testLogger sends the queue's logs to the test's log.
func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(p)))
	return len(p), nil
}

// newQueue returns a Queue on s, with its own client (a node of its own),
// closed when the test ends.
func newQueue(t testing.TB, s *redistest.Server, cfg redisqueue.Config) *redisqueue.Queue {
	t.Helper()
	cfg.Client = s.Client(t)
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	q, err := redisqueue.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := q.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return q
}

// prefix returns a key prefix of the test's own on a shared server.
func prefix(t testing.TB) string {
	return "test:" + strings.NewReplacer("{", "(", "}", ")").Replace(t.Name())
}

func timeout(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func TestConformance(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	queuetest.Exercise(t, func(t *testing.T, capacity int) queue.Queue {
		return newQueue(t, s, redisqueue.Config{Consumer: "node-1", Capacity: capacity, Prefix: prefix(t)})
	})
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled: New makes no call
	t.Cleanup(func() { _ = client.Close() })
	tests := []struct {
		name string
		cfg  redisqueue.Config
		want string
	}{
		{"no client", redisqueue.Config{Consumer: "n"}, "Config.Client"},
		{"no consumer", redisqueue.Config{Client: client}, "Config.Consumer"},
		{"negative capacity", redisqueue.Config{Client: client, Consumer: "n", Capacity: -1}, "Config.Capacity"},
		{"tiny visibility timeout", redisqueue.Config{Client: client, Consumer: "n", VisibilityTimeout: time.Millisecond}, "Config.VisibilityTimeout"},
		{"braces in prefix", redisqueue.Config{Client: client, Consumer: "n", Prefix: "a{b}"}, "Config.Prefix"},
		{"braces in a sharded prefix", redisqueue.Config{Client: client, Consumer: "n", Prefix: "a}", Shards: 2}, "Config.Prefix"},
		{"negative shards", redisqueue.Config{Client: client, Consumer: "n", Shards: -1}, "Config.Shards"},
		{"more shards than partition.Max", redisqueue.Config{Client: client, Consumer: "n", Shards: partition.Max + 1}, "Config.Shards"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := redisqueue.New(tt.cfg)
			if err == nil {
				q.Close()
				t.Fatal("New succeeded")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v, want it to name %s", err, tt.want)
			}
		})
	}
	q, err := redisqueue.New(redisqueue.Config{Client: client, Consumer: "n"})
	if err != nil {
		t.Fatalf("New with defaults: %v", err)
	}
	if err := q.Push(context.Background(), queue.Item{}); err == nil || !strings.Contains(err.Error(), "empty instance id") {
		t.Errorf("Push of an empty instance id: %v", err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := q.Pop(context.Background()); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Pop after Close: %v, want ErrClosed", err)
	}
	if err := q.Push(context.Background(), queue.Item{InstanceID: "a"}); !errors.Is(err, queue.ErrClosed) {
		t.Errorf("Push after Close: %v, want ErrClosed", err)
	}
}

// Two nodes pop from one queue: both get work, and in the normal case every
// item is handled exactly once.
func TestTwoNodesShareWork(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			p := prefix(t)
			nodes := []*redisqueue.Queue{
				newQueue(t, s, redisqueue.Config{Consumer: "node-a", Prefix: p, Shards: shards}),
				newQueue(t, s, redisqueue.Config{Consumer: "node-b", Prefix: p, Shards: shards}),
			}
			const items = 100
			ctx := timeout(t, 30*time.Second)
			for i := range items {
				if err := nodes[i%2].Push(ctx, queue.Item{InstanceID: fmt.Sprint("i", i), Reason: "start"}); err != nil {
					t.Fatal(err)
				}
			}
			var (
				mu       sync.Mutex
				handled  = map[string]int{}
				byNode   = map[int]int{}
				bothHeld = make(chan struct{}) // closed when each node holds an item at once
				holding  = 0
			)
			var wg sync.WaitGroup
			for n, q := range nodes {
				wg.Add(1)
				go func() {
					defer wg.Done()
					first := true
					for {
						mu.Lock()
						done := len(handled) == items
						mu.Unlock()
						if done {
							return
						}
						pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
						d, err := q.Pop(pctx)
						cancel()
						if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
							continue
						}
						if err != nil {
							t.Errorf("node %d: Pop: %v", n, err)
							return
						}
						if first {
							// Hold the first item until the other node holds one
							// too: proof that work goes to both.
							first = false
							mu.Lock()
							holding++
							if holding == len(nodes) {
								close(bothHeld)
							}
							mu.Unlock()
							select {
							case <-bothHeld:
							case <-ctx.Done():
								t.Errorf("node %d: the other node got no item while this one held %s", n, d.Item().InstanceID)
								return
							}
						}
						mu.Lock()
						handled[d.Item().InstanceID]++
						byNode[n]++
						mu.Unlock()
						if err := d.Ack(ctx); err != nil {
							t.Errorf("node %d: Ack: %v", n, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			for id, n := range handled {
				if n != 1 {
					t.Errorf("%s handled %d times", id, n)
				}
			}
			if len(handled) != items {
				t.Errorf("%d items handled, want %d", len(handled), items)
			}
			t.Logf("items per node: %v", byNode)
			for _, tag := range shardTags(t, p, shards) {
				if n, err := s.Client(t).XLen(ctx, tag+":ready").Result(); err != nil || n != 0 {
					t.Errorf("length of %s:ready after every ack = %d, %v; want 0 (acked entries are deleted)", tag, n, err)
				}
			}
		})
	}
}

// An item popped by a consumer that stops without acking goes to another
// consumer once the visibility timeout has passed, and not before, as it
// was pushed (its priority, key and weight too).
func TestRedeliveryAfterVisibilityTimeout(t *testing.T) {
	t.Parallel()
	const vt = 400 * time.Millisecond
	x := queue.Item{InstanceID: "x", Reason: "start", Priority: 2, Key: "tenant", Weight: 3}
	tests := []struct {
		name string
		// die queues x and pops it as a consumer that then stops without
		// acking; it returns the item as it will be delivered again.
		die func(t *testing.T, s *redistest.Server, alive *redisqueue.Queue, p string) queue.Item
	}{
		{"node closed after Pop", func(t *testing.T, s *redistest.Server, alive *redisqueue.Queue, p string) queue.Item {
			push(t, alive, x)
			q, err := redisqueue.New(redisqueue.Config{Client: s.Client(t), Consumer: "dead", Prefix: p, VisibilityTimeout: vt, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			d, err := q.Pop(timeout(t, 5*time.Second))
			if err != nil || d.Item() != x {
				t.Fatalf("Pop: %v, %v", d, err)
			}
			if err := q.Close(); err != nil {
				t.Fatal(err)
			}
			return x
		}},
		{"reply of the pop lost", func(t *testing.T, s *redistest.Server, alive *redisqueue.Queue, p string) queue.Item {
			// What a Pop runs in Redis, by a consumer that never reads
			// the answer.
			push(t, alive, x)
			c := s.Client(t)
			ctx := timeout(t, 5*time.Second)
			if err := c.XGroupCreateMkStream(ctx, "{"+p+"}:ready", "workers", "0").Err(); err != nil {
				t.Fatal(err)
			}
			tag := "{" + p + "}:"
			keys := []string{tag + "ready", tag + "queued", tag + "used"}
			for _, kind := range []string{"ring:", "weight:"} {
				for pr := weft.HighestPriority; pr <= weft.LowestPriority; pr++ {
					keys = append(keys, tag+kind+strconv.Itoa(pr))
				}
			}
			if err := redisqueue.PopScript.Run(ctx, c, keys, "workers", "dead", weft.LowestPriority).Err(); err != nil {
				t.Fatalf("pop script: %v", err)
			}
			if n, err := alive.Depth(ctx); err != nil || n != 0 {
				t.Fatalf("Depth after the lost pop = %d, %v; want 0", n, err)
			}
			return x
		}},
		{"old version: crash between read and bookkeeping", func(t *testing.T, s *redistest.Server, alive *redisqueue.Queue, p string) queue.Item {
			// An entry queued by the version before the fair order, and
			// the raw read that version did first, without what followed.
			c := s.Client(t)
			ctx := timeout(t, 5*time.Second)
			legacyPush(t, c, p, "x", "start")
			if err := c.XGroupCreateMkStream(ctx, "{"+p+"}:ready", "workers", "0").Err(); err != nil {
				t.Fatal(err)
			}
			res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "dead", Streams: []string{"{" + p + "}:ready", ">"}, Count: 1, Block: -1}).Result()
			if err != nil || len(res) != 1 || len(res[0].Messages) != 1 {
				t.Fatalf("XREADGROUP: %v, %v", res, err)
			}
			return queue.Item{InstanceID: "x", Reason: "start"}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			p := prefix(t)
			other := newQueue(t, s, redisqueue.Config{Consumer: "alive", Prefix: p, VisibilityTimeout: vt})
			ctx := timeout(t, 20*time.Second)
			before := time.Now()
			want := tt.die(t, s, other, p)

			d, err := other.Pop(ctx)
			if err != nil {
				t.Fatalf("Pop on the other node: %v", err)
			}
			if waited := time.Since(before); d.Item() != want || waited < vt {
				t.Fatalf("other node got %+v after %s, want %+v after at least %s", d.Item(), waited, want, vt)
			}
			// While it is held, a push for x queues a new item.
			push(t, other, queue.Item{InstanceID: "x", Reason: "resume"})
			if n, err := other.Depth(ctx); err != nil || n != 1 {
				t.Fatalf("Depth after a push for the held instance = %d, %v; want 1", n, err)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			d2, err := other.Pop(ctx)
			if err != nil || d2.Item().Reason != "resume" {
				t.Fatalf("second Pop: %v, %v; want the resume item", d2, err)
			}
			if err := d2.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			if n, _ := other.Depth(ctx); n != 0 {
				t.Fatalf("Depth at the end = %d", n)
			}
		})
	}
}

// A live consumer keeps its item however long it works on it: nobody else
// gets it after the visibility timeout. The timeout is long enough that a
// loaded machine cannot delay the consumer's refresh (every vt/3) past it.
func TestLiveConsumerKeepsItsItem(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			t.Parallel()
			const vt = 2 * time.Second
			s := redistest.Start(t)
			p := prefix(t)
			a := newQueue(t, s, redisqueue.Config{Consumer: "a", Prefix: p, Shards: shards, VisibilityTimeout: vt})
			b := newQueue(t, s, redisqueue.Config{Consumer: "b", Prefix: p, Shards: shards, VisibilityTimeout: vt})
			ctx := timeout(t, time.Minute)
			if err := a.Push(ctx, queue.Item{InstanceID: "long", Reason: "start"}); err != nil {
				t.Fatal(err)
			}
			d, err := a.Pop(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := b.Pop(timeout(t, 4*vt)); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("other node popped %v, %v while the first worked on it; want DeadlineExceeded", got, err)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatal(err)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("second Ack: %v", err)
			}
			if got, err := b.Pop(timeout(t, 2*vt)); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("other node popped %v, %v after the Ack; want DeadlineExceeded", got, err)
			}
		})
	}
}

// Queued items survive a restart of Redis (AOF), and a Pop waiting across
// the restart gets the next item.
func TestRedisRestartKeepsItems(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t, redistest.WithAppendFsync("always"))
	q := newQueue(t, s, redisqueue.Config{Consumer: "n", Prefix: prefix(t)})
	ctx := timeout(t, 60*time.Second)
	for _, id := range []string{"a", "b", "c"} {
		if err := q.Push(ctx, queue.Item{InstanceID: id, Reason: "start"}); err != nil {
			t.Fatal(err)
		}
	}
	s.Restart(t)
	if n, err := q.Depth(ctx); err != nil || n != 3 {
		t.Fatalf("Depth after restart = %d, %v; want 3", n, err)
	}
	for _, want := range []string{"a", "b", "c"} {
		d, err := q.Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if d.Item().InstanceID != want {
			t.Fatalf("popped %s, want %s", d.Item().InstanceID, want)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}

	got := make(chan string, 1)
	go func() {
		d, err := q.Pop(ctx)
		if err != nil {
			got <- err.Error()
			return
		}
		_ = d.Ack(ctx)
		got <- d.Item().InstanceID
	}()
	s.Restart(t)
	if err := q.Push(ctx, queue.Item{InstanceID: "d", Reason: "start"}); err != nil {
		t.Fatal(err)
	}
	select {
	case id := <-got:
		if id != "d" {
			t.Fatalf("Pop waiting across a restart returned %q", id)
		}
	case <-ctx.Done():
		t.Fatal("Pop waiting across a restart did not return the next item")
	}
}

// Pop returns promptly when its context is cancelled, and an item pushed
// afterwards is not lost to the abandoned read.
//
// Promptly: before the blocking read it abandons would have ended (a read
// window is a second), so a Pop that waited for its read would take about a
// second after each cancel. A loaded machine can delay any goroutine that
// long once; it keeps the quickest of the three tries, each of which must
// still end within 5s.
func TestPopCancel(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	q := newQueue(t, s, redisqueue.Config{Consumer: "n", Prefix: prefix(t)})
	const prompt = 500 * time.Millisecond // half a read window
	quickest := time.Hour
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		cancelled := make(chan time.Time, 1)
		time.AfterFunc(20*time.Millisecond, func() { // most likely while Pop waits in Redis
			cancelled <- time.Now()
			cancel()
		})
		errc := make(chan error, 1)
		go func() {
			_, err := q.Pop(ctx)
			errc <- err
		}()
		select {
		case err := <-errc:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Pop: %v, want Canceled", err)
			}
			quickest = min(quickest, time.Since(<-cancelled))
		case <-time.After(5 * time.Second):
			t.Fatal("Pop did not return after cancel")
		}
	}
	if quickest > prompt {
		t.Errorf("Pop returned %s after cancel at best of three, want within %s", quickest, prompt)
	}
	ctx := timeout(t, 10*time.Second)
	if err := q.Push(ctx, queue.Item{InstanceID: "after", Reason: "start"}); err != nil {
		t.Fatal(err)
	}
	d, err := q.Pop(ctx)
	if err != nil || d.Item().InstanceID != "after" {
		t.Fatalf("Pop after cancelled Pops: %v, %v", d, err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// A Push waiting for room on one node proceeds when another node pops.
func TestBackpressureAcrossNodes(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := prefix(t)
	a := newQueue(t, s, redisqueue.Config{Consumer: "a", Prefix: p, Capacity: 1})
	b := newQueue(t, s, redisqueue.Config{Consumer: "b", Prefix: p, Capacity: 1})
	ctx := timeout(t, 20*time.Second)
	if err := a.Push(ctx, queue.Item{InstanceID: "first", Reason: "start"}); err != nil {
		t.Fatal(err)
	}
	if err := a.Push(timeout(t, 100*time.Millisecond), queue.Item{InstanceID: "second", Reason: "start"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Push into a full queue: %v, want DeadlineExceeded", err)
	}
	// A push for the queued instance coalesces even when full.
	if err := a.Push(timeout(t, 5*time.Second), queue.Item{InstanceID: "first", Reason: "resume"}); err != nil {
		t.Fatalf("coalescing Push into a full queue: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- a.Push(ctx, queue.Item{InstanceID: "second", Reason: "start"}) }()
	d, err := b.Pop(ctx)
	if err != nil || d.Item().InstanceID != "first" {
		t.Fatalf("Pop on b: %v, %v", d, err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("Push on a did not proceed after b popped")
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
}

// An entry without an instance (written by something else) is logged and
// dropped, and does not stop the entries behind it.
func TestMalformedEntryDropped(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := prefix(t)
	q := newQueue(t, s, redisqueue.Config{Consumer: "n", Prefix: p})
	ctx := timeout(t, 10*time.Second)
	c := s.Client(t)
	if err := c.XAdd(ctx, &redis.XAddArgs{Stream: "{" + p + "}:ready", Values: []any{"junk", "1"}}).Err(); err != nil {
		t.Fatal(err)
	}
	if err := q.Push(ctx, queue.Item{InstanceID: "good", Reason: "start"}); err != nil {
		t.Fatal(err)
	}
	d, err := q.Pop(ctx)
	if err != nil || d.Item().InstanceID != "good" {
		t.Fatalf("Pop: %v, %v; want the good item", d, err)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	if n, err := c.XLen(ctx, "{"+p+"}:ready").Result(); err != nil || n != 0 {
		t.Fatalf("stream length = %d, %v; want 0 (the malformed entry acked and deleted)", n, err)
	}
}

// Three nodes share a stream of work; one of them takes items and stops
// without acking them. The two live nodes handle every item, those of the
// dead node included, each exactly once; with several shards, the dead
// node's items are in several of them, each taken over from its own.
func TestNodeDeathLosesNothing(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			t.Parallel()
			const vt, items, taken = 2 * time.Second, 150, 5
			s := redistest.Start(t)
			p := prefix(t)
			ctx := timeout(t, 60*time.Second)
			dead, err := redisqueue.New(redisqueue.Config{Client: s.Client(t), Consumer: "dead", Prefix: p, Shards: shards, VisibilityTimeout: vt, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			live := []*redisqueue.Queue{
				newQueue(t, s, redisqueue.Config{Consumer: "live-1", Prefix: p, Shards: shards, VisibilityTimeout: vt}),
				newQueue(t, s, redisqueue.Config{Consumer: "live-2", Prefix: p, Shards: shards, VisibilityTimeout: vt}),
			}
			for i := range items {
				if err := live[i%2].Push(ctx, queue.Item{InstanceID: fmt.Sprint("i", i), Reason: "start"}); err != nil {
					t.Fatal(err)
				}
			}
			for range taken {
				if _, err := dead.Pop(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if err := dead.Close(); err != nil { // stops without acking
				t.Fatal(err)
			}

			var mu sync.Mutex
			handled := map[string]int{}
			var wg sync.WaitGroup
			for _, q := range live {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						mu.Lock()
						done := len(handled) == items // the dead node's included
						mu.Unlock()
						if done || ctx.Err() != nil {
							return
						}
						pctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
						d, err := q.Pop(pctx)
						cancel()
						if err != nil {
							continue
						}
						mu.Lock()
						handled[d.Item().InstanceID]++
						mu.Unlock()
						if err := d.Ack(ctx); err != nil {
							t.Error(err)
						}
					}
				}()
			}
			wg.Wait()
			if len(handled) != items {
				t.Fatalf("%d distinct items handled, want %d", len(handled), items)
			}
			for id, n := range handled {
				if n != 1 {
					t.Errorf("%s handled %d times by the live nodes", id, n)
				}
			}
			if n, err := live[0].Depth(ctx); err != nil || n != 0 {
				t.Errorf("Depth at the end = %d, %v", n, err)
			}
			for _, tag := range shardTags(t, p, shards) {
				pending, err := s.Client(t).XPending(ctx, tag+":ready", "workers").Result()
				if err != nil || pending.Count != 0 {
					t.Errorf("pending entries of %s:ready at the end: %+v, %v", tag, pending, err)
				}
			}
		})
	}
}

// A consumer of the version before the fair order that read an entry and
// died before its bookkeeping leaves the entry in the queued hash. A later
// push for that instance (the recovery sweep queueing an instance whose
// node died) must queue it anew, not coalesce into the entry nobody can
// pop before the visibility timeout. The chaos harness found takeovers
// delayed by up to that timeout.
func TestPushAfterALostBookkeepingQueuesAgain(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := prefix(t)
	q := newQueue(t, s, redisqueue.Config{Consumer: "alive", Prefix: p, VisibilityTimeout: time.Minute})
	ctx := timeout(t, 20*time.Second)
	c := s.Client(t)
	// Before any read: the group does not exist yet, and a push coalesces
	// into the old entry.
	legacyPush(t, c, p, "x", "start")
	push(t, q, queue.Item{InstanceID: "x", Reason: "start"})
	if n, err := q.Depth(ctx); err != nil || n != 1 {
		t.Fatalf("Depth after two pushes = %d, %v; want 1", n, err)
	}
	// The raw read the old version did first, without the bookkeeping
	// after it.
	if err := c.XGroupCreateMkStream(ctx, "{"+p+"}:ready", "workers", "0").Err(); err != nil {
		t.Fatal(err)
	}
	res, err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "dead", Streams: []string{"{" + p + "}:ready", ">"}, Count: 1, Block: -1}).Result()
	if err != nil || len(res) != 1 || len(res[0].Messages) != 1 {
		t.Fatalf("XREADGROUP: %v, %v", res, err)
	}
	push(t, q, queue.Item{InstanceID: "x", Reason: "recovery", Key: "k"})
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d, err := q.Pop(pctx)
	if err != nil {
		t.Fatalf("Pop after a push for an instance whose entry a dead consumer read: %v; want the new item at once, not after the visibility timeout", err)
	}
	if want := (queue.Item{InstanceID: "x", Reason: "recovery", Key: "k"}); d.Item() != want {
		t.Fatalf("Pop = %+v, want %+v", d.Item(), want)
	}
	if err := d.Ack(ctx); err != nil {
		t.Fatal(err)
	}
	// A push while x's new item waits coalesces again.
	for range 2 {
		push(t, q, queue.Item{InstanceID: "x", Reason: "again"})
	}
	if n, err := q.Depth(ctx); err != nil || n != 1 {
		t.Fatalf("Depth after two more pushes = %d, %v; want 1", n, err)
	}
}

// push pushes item on q, failing the test on an error.
func push(t testing.TB, q *redisqueue.Queue, item queue.Item) {
	t.Helper()
	if err := q.Push(timeout(t, 10*time.Second), item); err != nil {
		t.Fatalf("Push(%+v): %v", item, err)
	}
}

// legacyPush queues an instance as the version before the fair order did,
// with that version's push script (capacity aside): a stream entry with
// the fields instance and reason, and the queued hash naming it. It
// returns the entry's ID.
func legacyPush(t testing.TB, c redis.UniversalClient, p, instance, reason string) string {
	t.Helper()
	id, err := oldPushScript.Run(timeout(t, 5*time.Second), c, []string{"{" + p + "}:ready", "{" + p + "}:queued"},
		instance, reason, 1_000_000, "workers").Text()
	if err != nil {
		t.Fatalf("pushing %s the old way: %v", instance, err)
	}
	return id
}

// oldPushScript is the push script of the version before the fair order,
// returning the ID it added.
var oldPushScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
	local p = redis.pcall('XPENDING', KEYS[1], ARGV[4], cur, cur, 1)
	if type(p) ~= 'table' or p.err or #p == 0 then return 0 end
	redis.call('HDEL', KEYS[2], ARGV[1])
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then return -1 end
local id = redis.call('XADD', KEYS[1], '*', 'instance', ARGV[1], 'reason', ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], id)
return id
`)
