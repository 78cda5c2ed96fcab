package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/fair"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// The Redis queue hands items out in fair.Order's order, whichever node
// pops, with many keys and every priority; see exerciseOrder.
func TestOrderMatchesModel(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint("seed ", seed), func(t *testing.T) {
			t.Parallel()
			p := prefix(t)
			nodes := [2]*redisqueue.Queue{
				newQueue(t, s, redisqueue.Config{Consumer: "a", Prefix: p, Capacity: 10_000}),
				newQueue(t, s, redisqueue.Config{Consumer: "b", Prefix: p, Capacity: 10_000}),
			}
			exerciseOrder(t, s.Client(t), nodes, p, seed, 1500)
		})
	}
}

// exerciseOrder drives two nodes of one queue with a seeded random
// sequence of pushes (over 40 keys, priorities -1…6, weights -1…4, and
// instances from a pool small enough that pushes of queued instances
// coalesce), pops on either node, and acks that come a few steps late, and
// holds it to fair.Order:
//   - every pop hands out the instance the Order pops, as first pushed;
//   - after every step, each priority's ring in Redis is the Order's lanes
//     in ring order, each lane list is as long as the Order's lane, each
//     weight is the lane's, the queued hash holds the queued instances, and
//     no other lane, ring or weight key exists;
//   - drained and acked, only the stream (empty) and the wake stream are
//     left under the queue's prefix.
func exerciseOrder(t *testing.T, c redis.UniversalClient, nodes [2]*redisqueue.Queue, p string, seed uint64, steps int) {
	ctx := timeout(t, 2*time.Minute)
	rng := rand.New(rand.NewPCG(seed, 35))
	keys := []string{""}
	for i := range 40 {
		keys = append(keys, fmt.Sprint("tenant-", i))
	}
	var model fair.Order
	first := map[string]queue.Item{} // queued instances, as first pushed
	var held []queue.Delivery        // popped, acked later
	pop := func(step int) {
		t.Helper()
		want, _ := model.Pop()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := nodes[rng.IntN(2)].Pop(pctx)
		cancel()
		if err != nil {
			t.Fatalf("step %d: Pop: %v (the fair order pops %s)", step, err, want.ID)
		}
		if got := d.Item(); got != first[want.ID] {
			t.Fatalf("step %d: popped %+v, the fair order pops %+v", step, got, first[want.ID])
		}
		delete(first, want.ID)
		held = append(held, d)
		for len(held) > rng.IntN(4) {
			if err := held[0].Ack(ctx); err != nil {
				t.Fatalf("step %d: Ack: %v", step, err)
			}
			held = held[1:]
		}
	}
	for step := range steps {
		if model.Len() == 0 || rng.IntN(5) < 3 {
			it := queue.Item{
				InstanceID: fmt.Sprint("i", rng.IntN(300)),
				Reason:     fmt.Sprint("r", step),
				Priority:   rng.IntN(8) - 1,
				Key:        keys[rng.IntN(len(keys))],
				Weight:     rng.IntN(6) - 1,
			}
			if model.Push(fair.Entry{ID: it.InstanceID, Priority: it.Priority, Key: it.Key, Weight: it.Weight}) {
				first[it.InstanceID] = it
			}
			push(t, nodes[rng.IntN(2)], it)
		} else {
			pop(step)
		}
		checkLayout(t, ctx, c, p, &model, step)
	}
	for step := steps; model.Len() > 0; step++ {
		pop(step)
	}
	for _, d := range held {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	checkLayout(t, ctx, c, p, &model, -1)
	left := scanKeys(t, ctx, c, "{"+p+"}:*")
	slices.Sort(left)
	if want := []string{"{" + p + "}:ready", "{" + p + "}:wake"}; !slices.Equal(left, want) {
		t.Errorf("keys left after draining: %q, want %q", left, want)
	}
	if n, err := c.XLen(ctx, "{"+p+"}:ready").Result(); err != nil || n != 0 {
		t.Errorf("stream length after every ack = %d, %v; want 0", n, err)
	}
	// Trimmed to about 64 tokens (MAXLEN ~): whole stream nodes of up to
	// 100 entries (stream-node-max-entries) go at once.
	if n, err := c.XLen(ctx, "{"+p+"}:wake").Result(); err != nil || n > 64+100 {
		t.Errorf("wake stream length = %d, %v; want at most 164", n, err)
	}
}

// checkLayout compares the fair structures in Redis with the model (see
// exerciseOrder).
func checkLayout(t *testing.T, ctx context.Context, c redis.UniversalClient, p string, model *fair.Order, step int) {
	t.Helper()
	tag := "{" + p + "}:"
	type lane struct {
		queued *redis.IntCmd
		weight *redis.StringCmd
		want   fair.Lane
	}
	var lanes []lane
	var rings [weft.LowestPriority + 1]*redis.StringSliceCmd
	var weights [weft.LowestPriority + 1]*redis.IntCmd
	pipe := c.Pipeline()
	queued := pipe.HLen(ctx, tag+"queued")
	for pr := weft.HighestPriority; pr <= weft.LowestPriority; pr++ {
		rings[pr] = pipe.LRange(ctx, tag+"ring:"+strconv.Itoa(pr), 0, -1)
		weights[pr] = pipe.HLen(ctx, tag+"weight:"+strconv.Itoa(pr))
	}
	for l := range model.Lanes() {
		ps := strconv.Itoa(l.Priority)
		lanes = append(lanes, lane{
			queued: pipe.LLen(ctx, tag+"lane:"+ps+":"+l.Key),
			weight: pipe.HGet(ctx, tag+"weight:"+ps, l.Key),
			want:   l,
		})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatalf("step %d: reading the layout: %v", step, err)
	}
	if got := int(queued.Val()); got != model.Len() {
		t.Fatalf("step %d: queued hash holds %d, the order %d", step, got, model.Len())
	}
	var want [weft.LowestPriority + 1][]string
	for _, l := range lanes {
		want[l.want.Priority] = append(want[l.want.Priority], l.want.Key)
		if got := int(l.queued.Val()); got != l.want.Queued {
			t.Fatalf("step %d: lane %d/%q holds %d, the order's %d", step, l.want.Priority, l.want.Key, got, l.want.Queued)
		}
		if got, _ := l.weight.Int(); got != l.want.Weight {
			t.Fatalf("step %d: lane %d/%q has weight %d, the order's %d", step, l.want.Priority, l.want.Key, got, l.want.Weight)
		}
	}
	for pr := weft.HighestPriority; pr <= weft.LowestPriority; pr++ {
		if got := rings[pr].Val(); !slices.Equal(got, want[pr]) && len(got)+len(want[pr]) > 0 {
			t.Fatalf("step %d: ring %d is %q, the order's %q", step, pr, got, want[pr])
		}
		if got := int(weights[pr].Val()); got != len(want[pr]) {
			t.Fatalf("step %d: %d weights at priority %d, the order has %d lanes", step, got, pr, len(want[pr]))
		}
	}
	if got := len(scanKeys(t, ctx, c, tag+"lane:*")); got != len(lanes) {
		t.Fatalf("step %d: %d lane keys, the order has %d lanes", step, got, len(lanes))
	}
}

// scanKeys returns the keys matching pattern. On a Redis Cluster it scans
// one node, which is all of the one-node cluster the tests start.
func scanKeys(t *testing.T, ctx context.Context, c redis.UniversalClient, pattern string) []string {
	t.Helper()
	var keys []string
	iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatalf("scanning %s: %v", pattern, err)
	}
	return keys
}
