package redisqueue_test

import (
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// A shard whose master stops answering (paused, as a stalled host) does
// not stop the others: once a call on it failed, a Pop leaves it out and
// waits on the wake stream of a shard that answers, and an item pushed
// there is popped at once: woken, neither found by a look (the queue's
// clock stands still, so no look comes due) nor by a backoff (the Pop
// meets no error). Once the master answers again, a probe, which a look
// starts at most once a window, finds the item queued in its shard.
func TestShardDownLeavesTheOthersAwake(t *testing.T) {
	t.Parallel()
	const (
		shards = 4
		vt     = 4 * time.Second // a window of 1s
		window = vt / 4
		// bound is how long a woken Pop may take, well under the 5s a
		// call on the paused master waits before it fails.
		bound = 2 * time.Second
	)
	// No failover within the test: the paused master keeps its slots, and
	// the cluster stays ok for the others.
	c := redistest.StartClusterOf(t, 3, 0, redistest.WithClusterNodeTimeout(5*time.Minute))
	var clock atomic.Int64 // the queue's, in Unix nanoseconds: it moves when the test says
	clock.Store(time.Now().UnixNano())
	p := prefix(t)
	rq, err := redisqueue.New(redisqueue.Config{
		Client: c.Client(t), Consumer: "n", Prefix: p, Shards: shards, VisibilityTimeout: vt,
		Logger: testLogger(t), Now: func() time.Time { return time.Unix(0, clock.Load()) },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rq.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	ctx := timeout(t, 3*time.Minute)
	type popped struct {
		id  string
		err error
		at  time.Time
	}
	pop := func() <-chan popped {
		out := make(chan popped, 1)
		go func() {
			d, err := rq.Pop(ctx)
			if err != nil {
				out <- popped{err: err}
				return
			}
			at := time.Now()
			if err := d.Ack(ctx); err != nil {
				t.Errorf("Ack: %v", err)
			}
			out <- popped{id: d.Item().InstanceID, at: at}
		}()
		return out
	}
	// Every shard's stream and groups exist before the pause.
	for q := range shards {
		push(t, rq, queue.Item{InstanceID: idsIn(q, shards, 1, "warm")[0], Reason: "start"})
	}
	for range shards {
		if got := <-pop(); got.err != nil {
			t.Fatal(got.err)
		}
	}

	tags := shardTags(t, p, shards)
	const down = 0
	paused := c.MasterOf(t, tags[down]+":ready")
	var others []int // the shards of the other masters
	for q, tag := range tags {
		if c.MasterOf(t, tag+":ready") != paused {
			others = append(others, q)
		}
	}
	if len(others) == 0 {
		t.Fatalf("every shard is on %s", paused.Addr())
	}
	paused.Pause(t)
	t.Cleanup(func() { paused.Resume(t) }) // before Close: a call in progress ends sooner

	// The Pop tries every shard once (those of the paused master fail
	// after their timeout), then waits on one of the others.
	got := pop()
	deadline := time.Now().Add(time.Minute)
	for len(rq.WaitingOn()) == 0 {
		select {
		case g := <-got:
			t.Fatalf("Pop returned %q, %v with nothing queued", g.id, g.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no Pop waits on a wake stream a minute after %s was paused (shards down: %v)", paused.Addr(), rq.Down())
		}
		poll := time.NewTimer(20 * time.Millisecond)
		<-poll.C
	}
	on := rq.WaitingOn()[0]
	if !slices.Contains(others, on) {
		t.Fatalf("the Pop waits on shard %d, of the paused master; the others are %v", on, others)
	}
	if d := rq.Down(); !slices.Contains(d, down) {
		t.Fatalf("shards down %v, want %d among them", d, down)
	}
	id := idsIn(on, shards, 1, "while-down")[0]
	pushed := time.Now()
	push(t, rq, queue.Item{InstanceID: id, Reason: "start"})
	select {
	case g := <-got:
		if g.err != nil || g.id != id {
			t.Fatalf("Pop returned %q, %v; want %s", g.id, g.err, id)
		}
		if lat := g.at.Sub(pushed); lat > bound {
			t.Fatalf("an item of shard %d, which a Pop waited on, popped %s after its push, want at most %s", on, lat, bound)
		} else {
			t.Logf("an item of shard %d popped %s after its push, shard %d's master paused", on, lat.Round(time.Millisecond), down)
		}
	case <-time.After(bound):
		t.Fatalf("an item of shard %d, which a Pop waited on, not popped %s after its push", on, bound)
	}

	// The master answers again: an item of its shard is found by a probe,
	// as the queue's clock moves on a window at a time.
	paused.Resume(t)
	back := idsIn(down, shards, 1, "back")[0]
	for {
		err := rq.Push(timeout(t, 10*time.Second), queue.Item{InstanceID: back, Reason: "start"})
		if err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("pushing to shard %d after its master was resumed: %v", down, err)
		}
		t.Logf("pushing to shard %d after its master was resumed: %v; again", down, err)
		pause := time.NewTimer(50 * time.Millisecond)
		<-pause.C
	}
	got = pop()
	for done := false; !done; {
		tick := time.NewTimer(100 * time.Millisecond)
		select {
		case g := <-got:
			tick.Stop()
			if g.err != nil || g.id != back {
				t.Fatalf("Pop returned %q, %v; want %s", g.id, g.err, back)
			}
			done = true
		case <-tick.C:
			clock.Add(int64(window))
		case <-ctx.Done():
			t.Fatalf("the item of shard %d not popped after its master was resumed (shards down: %v)", down, rq.Down())
		}
	}
	if d := rq.Down(); slices.Contains(d, down) {
		t.Fatalf("shard %d is still down after a probe popped from it (down: %v)", down, d)
	}
}
