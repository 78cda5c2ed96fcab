package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/partition"
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
			exerciseOrder(t, s.Client(t), nodes, p, 1, seed, 1500)
		})
	}
}

// exerciseOrder drives two nodes of one queue of the given number of
// shards with a seeded random sequence of pushes (over 40 keys, priorities
// -1…6, weights -1…4, and instances from a pool small enough that pushes
// of queued instances coalesce), pops on either node, and acks that come a
// few steps late, and holds each shard to a fair.Order of the items pushed
// to it (instances go to shard partition.Of(id, shards)):
//   - every pop hands out the instance its shard's Order pops, as first
//     pushed;
//   - after every step, in each shard, each priority's ring in Redis is the
//     Order's lanes in ring order, each lane list is as long as the Order's
//     lane, each weight is the lane's, the queued hash holds the queued
//     instances, and no other lane, ring or weight key exists;
//   - drained and acked, only the streams (empty) and the wake streams are
//     left under the shards' tags.
func exerciseOrder(t *testing.T, c redis.UniversalClient, nodes [2]*redisqueue.Queue, p string, shards int, seed uint64, steps int) {
	ctx := timeout(t, 2*time.Minute)
	rng := rand.New(rand.NewPCG(seed, 35))
	keys := []string{""}
	for i := range 40 {
		keys = append(keys, fmt.Sprint("tenant-", i))
	}
	tags := shardTags(t, p, shards)
	models := make([]fair.Order, shards)
	queued := func() (n int) {
		for i := range models {
			n += models[i].Len()
		}
		return n
	}
	first := map[string]queue.Item{} // queued instances, as first pushed
	var held []queue.Delivery        // popped, acked later
	popped := make([]int, shards)    // by shard
	pop := func(step int) (shard int) {
		t.Helper()
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		d, err := nodes[rng.IntN(2)].Pop(pctx)
		cancel()
		if err != nil {
			t.Fatalf("step %d: Pop: %v (%d queued)", step, err, queued())
		}
		got := d.Item()
		q := partition.Of(got.InstanceID, shards)
		want, ok := models[q].Pop()
		if !ok || got != first[want.ID] {
			t.Fatalf("step %d: popped %+v, the fair order of its shard %d pops %+v", step, got, q, first[want.ID])
		}
		popped[q]++
		delete(first, want.ID)
		held = append(held, d)
		for len(held) > rng.IntN(4) {
			if err := held[0].Ack(ctx); err != nil {
				t.Fatalf("step %d: Ack: %v", step, err)
			}
			held = held[1:]
		}
		return q
	}
	for step := range steps {
		if queued() == 0 || rng.IntN(5) < 3 {
			it := queue.Item{
				InstanceID: fmt.Sprint("i", rng.IntN(300)),
				Reason:     fmt.Sprint("r", step),
				Priority:   rng.IntN(8) - 1,
				Key:        keys[rng.IntN(len(keys))],
				Weight:     rng.IntN(6) - 1,
			}
			q := partition.Of(it.InstanceID, shards)
			if models[q].Push(fair.Entry{ID: it.InstanceID, Priority: it.Priority, Key: it.Key, Weight: it.Weight}) {
				first[it.InstanceID] = it
			}
			push(t, nodes[rng.IntN(2)], it)
			checkLayout(t, ctx, c, tags[q], &models[q], step)
		} else {
			q := pop(step)
			checkLayout(t, ctx, c, tags[q], &models[q], step)
		}
	}
	for step := steps; queued() > 0; step++ {
		pop(step)
	}
	for _, d := range held {
		if err := d.Ack(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for q, tag := range tags {
		checkLayout(t, ctx, c, tag, &models[q], -1)
		want = append(want, tag+":ready", tag+":wake")
		if n, err := c.XLen(ctx, tag+":ready").Result(); err != nil || n != 0 {
			t.Errorf("stream length of shard %d after every ack = %d, %v; want 0", q, n, err)
		}
		// Trimmed to about 64 tokens (MAXLEN ~): whole stream nodes of
		// up to 100 entries (stream-node-max-entries) go at once.
		if n, err := c.XLen(ctx, tag+":wake").Result(); err != nil || n > 64+100 {
			t.Errorf("wake stream length of shard %d = %d, %v; want at most 164", q, n, err)
		}
		if shards > 1 && popped[q] == 0 {
			t.Errorf("shard %d: nothing popped from it", q)
		}
	}
	var left []string
	for _, tag := range tags {
		left = append(left, scanKeys(t, ctx, c, tag+":*")...)
	}
	slices.Sort(left)
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("keys left after draining: %q, want %q", left, want)
	}
	t.Logf("items popped by shard: %v", popped)
}

// shardTags returns the hash tags of the shards of a queue under prefix p,
// as the package doc's layout names them: "{p}" for one shard, and
// partition.Tags(p + ":", shards) for several.
func shardTags(t testing.TB, p string, shards int) []string {
	t.Helper()
	if shards == 1 {
		return []string{"{" + p + "}"}
	}
	tags, err := partition.Tags(p+":", shards)
	if err != nil {
		t.Fatal(err)
	}
	return tags
}

// checkLayout compares the fair structures of the shard whose hash tag is
// tag with the model (see exerciseOrder).
func checkLayout(t *testing.T, ctx context.Context, c redis.UniversalClient, tag string, model *fair.Order, step int) {
	t.Helper()
	tag += ":"
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

// scanKeys returns the keys matching pattern; on a Redis Cluster, those of
// every master.
func scanKeys(t *testing.T, ctx context.Context, c redis.UniversalClient, pattern string) []string {
	t.Helper()
	var (
		mu   sync.Mutex
		keys []string
	)
	scan := func(ctx context.Context, c redis.Cmdable) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			keys = append(keys, iter.Val())
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := c.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error { return scan(ctx, m) })
	} else {
		err = scan(ctx, c)
	}
	if err != nil {
		t.Fatalf("scanning %s: %v", pattern, err)
	}
	return keys
}
