package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/queuetest"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// colocated adapts a queue of several shards to the conformance suite,
// whose order and capacity checks are those of one fair order and one
// capacity, which a sharded queue keeps within each shard: it puts every
// instance it pushes in the one shard given, by appending to the id a
// suffix ("#n", the first that partition.Of maps there), and strips the
// suffix from what Pop hands out.
type colocated struct {
	q             *redisqueue.Queue
	shard, shards int
}

func (c colocated) id(id string) string {
	for n := 0; ; n++ {
		if s := id + "#" + strconv.Itoa(n); partition.Of(s, c.shards) == c.shard {
			return s
		}
	}
}

func (c colocated) Push(ctx context.Context, item queue.Item) error {
	item.InstanceID = c.id(item.InstanceID)
	return c.q.Push(ctx, item)
}

func (c colocated) Pop(ctx context.Context) (queue.Delivery, error) {
	d, err := c.q.Pop(ctx)
	if err != nil {
		return nil, err
	}
	it := d.Item()
	id, _, ok := strings.Cut(it.InstanceID, "#")
	if !ok {
		return nil, fmt.Errorf("popped %q, which the adapter did not push", it.InstanceID)
	}
	it.InstanceID = id
	return stripped{d, it}, nil
}

func (c colocated) Depth(ctx context.Context) (int, error) { return c.q.Depth(ctx) }

// stripped is a delivery whose item's id is the one the suite pushed.
type stripped struct {
	queue.Delivery
	item queue.Item
}

func (s stripped) Item() queue.Item { return s.item }

// exerciseSharded runs the conformance suite on queues of the given number
// of shards that open returns, each queue's items in one shard (the next
// shard for each queue, so that the suite's queues use them all) with the
// suite's capacity: the queue's Capacity is that times the shards.
func exerciseSharded(t *testing.T, shards int, open func(t *testing.T, cfg redisqueue.Config) *redisqueue.Queue) {
	var n atomic.Int64
	queuetest.Exercise(t, func(t *testing.T, capacity int) queue.Queue {
		i := int(n.Add(1))
		q := open(t, redisqueue.Config{Consumer: "node-1", Capacity: capacity * shards, Shards: shards, Prefix: fmt.Sprintf("sharded-%d", i)})
		return colocated{q: q, shard: i % shards, shards: shards}
	})
}

// TestConformanceSharded runs the suite on queues of 4 shards on one
// server.
func TestConformanceSharded(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	exerciseSharded(t, 4, func(t *testing.T, cfg redisqueue.Config) *redisqueue.Queue {
		return newQueue(t, s, cfg)
	})
}

// With several shards, instances spread over them by partition.Of, and
// each shard keeps the fair order of its items; see exerciseOrder.
func TestShardedOrderMatchesModel(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	for _, shards := range []int{2, 5} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			nodes := [2]*redisqueue.Queue{
				newQueue(t, s, redisqueue.Config{Consumer: "a", Prefix: p, Capacity: 10_000, Shards: shards}),
				newQueue(t, s, redisqueue.Config{Consumer: "b", Prefix: p, Capacity: 10_000, Shards: shards}),
			}
			exerciseOrder(t, s.Client(t), nodes, p, shards, 7, 1000)
		})
	}
}

// idsIn returns n instance ids that partition.Of puts in shard q of shards.
func idsIn(q, shards, n int, base string) []string {
	var ids []string
	for i := 0; len(ids) < n; i++ {
		if id := fmt.Sprint(base, i); partition.Of(id, shards) == q {
			ids = append(ids, id)
		}
	}
	return ids
}

// Each shard holds ceil(Capacity/Shards) items before a push into it waits
// (its lane being at its fair share), whatever the other shards hold; one
// shard's keys are the layout before shards, several shards' are under
// partition.Tags(Prefix + ":", Shards).
func TestShardCapacityAndKeys(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	tests := []struct {
		capacity, shards int
		perShard         int // ceil(capacity/shards)
	}{
		{5, 1, 5},
		{10, 4, 3},
		{8, 4, 2},
		{4, 4, 1},
		{1, 3, 1},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("capacity=%d,shards=%d", tt.capacity, tt.shards), func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			q := newQueue(t, s, redisqueue.Config{Consumer: "n", Prefix: p, Capacity: tt.capacity, Shards: tt.shards})
			ctx := timeout(t, 30*time.Second)
			c := s.Client(t)
			tags := shardTags(t, p, tt.shards)
			for shard, tag := range tags {
				ids := idsIn(shard, tt.shards, tt.perShard+1, "i")
				for _, id := range ids[:tt.perShard] {
					push(t, q, queue.Item{InstanceID: id, Reason: "start"})
				}
				wctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
				err := q.Push(wctx, queue.Item{InstanceID: ids[tt.perShard], Reason: "start"})
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("shard %d: push of item %d: %v, want it to wait (%d a shard)", shard, tt.perShard+1, err, tt.perShard)
				}
				if n, err := c.HLen(ctx, tag+":queued").Result(); err != nil || int(n) != tt.perShard {
					t.Fatalf("shard %d: %s holds %d, %v; want %d", shard, tag+":queued", n, err, tt.perShard)
				}
			}
			if n, err := q.Depth(ctx); err != nil || n != tt.perShard*tt.shards {
				t.Fatalf("Depth = %d, %v; want %d", n, err, tt.perShard*tt.shards)
			}
			var want []string
			for _, tag := range tags {
				want = append(want, tag+":lane:3:", tag+":queued", tag+":ring:3", tag+":weight:3", tag+":wake")
			}
			keys := scanKeys(t, ctx, c, "{"+p+"*")
			slices.Sort(keys)
			slices.Sort(want)
			if !slices.Equal(keys, want) {
				t.Fatalf("keys %q, want %q", keys, want)
			}
			if tt.shards == 1 && tags[0] != "{"+p+"}" {
				t.Fatalf("one shard's tag is %q, want the layout before shards", tags[0])
			}
		})
	}
}

// With fewer waiting Pops than shards, an item pushed to a shard that no
// Pop waits on is still taken within the bound the package doc states: a
// wait window (a quarter of the visibility timeout here) and the look at
// every shard that follows it. The test waits until both Pops are blocked
// in Redis before each push, and logs the latencies per shard.
//
// Pops start from the next shard in turn, and a waiting Pop waits on its
// start shard while no other Pop of its queue waits there, so the two
// waiting Pops wait on shards near the count of Pops so far; the j-th item
// goes half the shards further on (shard j+4 of 8), out of their reach
// but for the odd Pop that stayed behind.
func TestFewerWaitersThanShards(t *testing.T) {
	t.Parallel()
	const (
		shards  = 8
		waiters = 2
		rounds  = 3
		vt      = time.Second
		window  = vt / 4
		// slack covers a loaded machine's scheduling, the look's round
		// trips (one script per shard), and the up to 100ms by which
		// Redis ends a blocking read late (hz 10).
		slack = time.Second
	)
	s := redistest.Start(t)
	p := prefix(t)
	q := newQueue(t, s, redisqueue.Config{Consumer: "waiter", Prefix: p, Shards: shards, VisibilityTimeout: vt})
	pusher := newQueue(t, s, redisqueue.Config{Consumer: "pusher", Prefix: p, Shards: shards, VisibilityTimeout: vt})
	ctx := timeout(t, 2*time.Minute)
	admin := s.Client(t)

	type popped struct {
		id string
		at time.Time
	}
	got := make(chan popped)
	popCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				d, err := q.Pop(popCtx)
				if err != nil {
					return
				}
				at := time.Now()
				if err := d.Ack(ctx); err != nil {
					t.Error(err)
				}
				select {
				case got <- popped{d.Item().InstanceID, at}:
				case <-popCtx.Done():
					return
				}
			}
		}()
	}
	t.Cleanup(func() {
		stop()
		wg.Wait()
	})
	// blocked waits until both Pops wait in Redis (XREADGROUP BLOCK).
	blocked := func() {
		t.Helper()
		for {
			info, err := admin.Info(ctx, "clients").Result()
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(info, "blocked_clients:"+strconv.Itoa(waiters)+"\r") {
				return
			}
			select {
			case <-ctx.Done():
				t.Fatalf("the Pops did not both wait in Redis: %s", info)
			case <-time.After(5 * time.Millisecond): // polling, with the test's deadline
			}
		}
	}
	worst := make([]time.Duration, shards)
	var slow int // items that waited longer than a round trip would
	for r := range rounds {
		for j := range shards {
			shard := (r*shards + j + shards/2) % shards
			id := idsIn(shard, shards, r+1, "w")[r]
			blocked()
			pushed := time.Now()
			push(t, pusher, queue.Item{InstanceID: id, Reason: "start"})
			select {
			case g := <-got:
				if g.id != id {
					t.Fatalf("popped %s, want %s", g.id, id)
				}
				lat := g.at.Sub(pushed)
				worst[shard] = max(worst[shard], lat)
				if lat > 20*time.Millisecond {
					slow++
				}
			case <-ctx.Done():
				t.Fatalf("item %s of shard %d not popped", id, shard)
			}
		}
	}
	t.Logf("worst latency by shard, %d waiting Pops, %s window: %v; %d of %d items waited over 20ms (found by a look)", waiters, window, worst, slow, rounds*shards)
	for shard, w := range worst {
		if w > window+slack {
			t.Errorf("shard %d: an item waited %s, want at most a window (%s) and %s of slack", shard, w, window, slack)
		}
	}
}

// A queue of several shards runs its scripts under the shebang "#!lua",
// and a queue of one shard without it.
func TestShardedQueueRunsGuardedScripts(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	ctx := timeout(t, 20*time.Second)
	c := s.Client(t)
	for _, shards := range []int{1, 3} {
		q := newQueue(t, s, redisqueue.Config{Consumer: "n", Prefix: fmt.Sprint(prefix(t), shards), Shards: shards})
		push(t, q, queue.Item{InstanceID: "x", Reason: "start"})
		d, err := q.Pop(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	loaded, err := c.ScriptExists(ctx, redisqueue.PopScript.Hash(), redisqueue.GuardedPopScript.Hash()).Result()
	if err != nil {
		t.Fatal(err)
	}
	if !loaded[0] || !loaded[1] {
		t.Fatalf("scripts loaded (plain, guarded): %v; want both, each by its queue", loaded)
	}
	if redisqueue.PopScript.Hash() == redisqueue.GuardedPopScript.Hash() {
		t.Fatal("the guarded pop script is the plain one")
	}
}

// What the shebang buys on a Redis Cluster (the package doc, "Shards"): a
// script under it that reaches a key of another slot than its declared
// keys' fails even when the same node serves both slots, where one without
// it does not. If Redis changes this, the guard's doc must change.
func TestShebangRefusesUndeclaredSlots(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t).ClusterClient(t)
	ctx := timeout(t, 20*time.Second)
	const body = "redis.call('SET', KEYS[1], 1)\nreturn redis.call('SET', '{other}:x', 1)"
	if err := redis.NewScript(body).Run(ctx, c, []string{"{mine}:x"}).Err(); err != nil {
		t.Fatalf("without the shebang: %v; Redis 7 allowed it", err)
	}
	err := redis.NewScript("#!lua\n"+body).Run(ctx, c, []string{"{mine}:x"}).Err()
	if err == nil || !strings.Contains(err.Error(), "do not hash to the same slot") {
		t.Fatalf("with the shebang: %v; want the same-slot error", err)
	}
}

// An item that a wait of an abandoned Pop takes is not lost: Close hands it
// back to its shard, at the head of its lane, and another node pops it.
// Every shard gets one item, so whichever shard the abandoned Pop waits on
// gets one for it to take.
func TestCloseHandsBackAnAbandonedRead(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			p := prefix(t)
			admin := s.Client(t)
			ctx := timeout(t, 30*time.Second)
			q, err := redisqueue.New(redisqueue.Config{Client: s.Client(t), Consumer: "closing", Prefix: p, Shards: shards, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			closed := false
			t.Cleanup(func() {
				if !closed {
					_ = q.Close()
				}
			})
			// A Pop that gives up while its read waits in Redis (a wait
			// window is a second).
			pctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := q.Pop(pctx)
				done <- err
			}()
			for {
				info, err := admin.Info(ctx, "clients").Result()
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(info, "blocked_clients:1\r") {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatal("the Pop did not wait in Redis")
				case <-time.After(5 * time.Millisecond): // polling, with the test's deadline
				}
			}
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("Pop: %v, want Canceled", err)
			}
			other := newQueue(t, s, redisqueue.Config{Consumer: "other", Prefix: p, Shards: shards})
			var items []queue.Item
			for shard := range shards {
				it := queue.Item{InstanceID: idsIn(shard, shards, 1, "x")[0], Reason: "start", Key: "k"}
				items = append(items, it)
				push(t, other, it)
			}
			// The abandoned read takes the item of its shard.
			for {
				n, err := other.Depth(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if n == shards-1 {
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("Depth stayed %d: the abandoned read took nothing", n)
				case <-time.After(5 * time.Millisecond): // polling, with the test's deadline
				}
			}
			closed = true
			if err := q.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if n, err := other.Depth(ctx); err != nil || n != shards {
				t.Fatalf("Depth after Close = %d, %v; want %d (the item handed back)", n, err, shards)
			}
			var got []queue.Item
			for range shards {
				d, err := other.Pop(ctx)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, d.Item())
				if err := d.Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
			byID := func(a, b queue.Item) int { return strings.Compare(a.InstanceID, b.InstanceID) }
			slices.SortFunc(got, byID)
			slices.SortFunc(items, byID)
			if !slices.Equal(got, items) {
				t.Fatalf("popped %+v, want %+v", got, items)
			}
		})
	}
}

// A Redis out of memory (maxmemory reached, noeviction) refuses pushes but
// still takes acks, with one shard or several: the scripts that only free
// memory carry allow-oom under the shebang of several shards, which would
// otherwise refuse them whole.
func TestAckWhileRedisIsFull(t *testing.T) {
	t.Parallel()
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprint("shards=", shards), func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			admin := s.Client(t)
			ctx := timeout(t, 20*time.Second)
			q := newQueue(t, s, redisqueue.Config{Consumer: "n", Prefix: prefix(t), Shards: shards})
			push(t, q, queue.Item{InstanceID: "a", Reason: "start"})
			d, err := q.Pop(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
				t.Fatal(err)
			}
			err = q.Push(ctx, queue.Item{InstanceID: "b", Reason: "start"})
			if err == nil || !strings.Contains(err.Error(), "OOM") {
				t.Fatalf("Push into a full Redis: %v, want an OOM error", err)
			}
			if err := d.Ack(ctx); err != nil {
				t.Fatalf("Ack in a full Redis: %v", err)
			}
			if err := admin.ConfigSet(ctx, "maxmemory", "0").Err(); err != nil {
				t.Fatal(err)
			}
			for _, tag := range shardTags(t, prefix(t), shards) {
				if n, err := admin.XLen(ctx, tag+":ready").Result(); err != nil || n != 0 {
					t.Fatalf("%s:ready holds %d, %v after the Ack; want 0", tag, n, err)
				}
			}
		})
	}
}
