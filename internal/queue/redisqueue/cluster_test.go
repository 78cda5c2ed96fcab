package redisqueue_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/queuetest"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// TestOnCluster runs the conformance suite and the order's model test
// through a ClusterClient on a one-node Redis Cluster, which refuses a
// command whose declared keys are of several slots, then checks that every
// key the queues wrote, the lanes the pop script names included, is in its
// queue's slot. (It does not refuse a script without the shebang that
// reaches an undeclared key of another slot: TestShebangRefusesUndeclaredSlots.)
func TestOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t).ClusterClient(t)
	var n atomic.Int64
	open := func(t *testing.T, cfg redisqueue.Config) *redisqueue.Queue {
		cfg.Client, cfg.Logger = c, testLogger(t)
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
	t.Run("suite", func(t *testing.T) {
		queuetest.Exercise(t, func(t *testing.T, capacity int) queue.Queue {
			return open(t, redisqueue.Config{Consumer: "node-1", Capacity: capacity, Prefix: fmt.Sprintf("cluster-%d", n.Add(1))})
		})
	})
	t.Run("order", func(t *testing.T) {
		p := fmt.Sprintf("cluster-%d", n.Add(1))
		nodes := [2]*redisqueue.Queue{
			open(t, redisqueue.Config{Consumer: "a", Prefix: p, Capacity: 10_000}),
			open(t, redisqueue.Config{Consumer: "b", Prefix: p, Capacity: 10_000}),
		}
		exerciseOrder(t, c, nodes, p, 1, 4, 600)
	})

	ctx := timeout(t, 30*time.Second)
	keys := scanKeys(t, ctx, c, "*")
	for _, k := range keys {
		end := strings.IndexByte(k, '}')
		if !strings.HasPrefix(k, "{cluster-") || end < 0 {
			t.Errorf("key %q is outside every queue's hash tag", k)
			continue
		}
		want, err := c.ClusterKeySlot(ctx, k[:end+1]).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.ClusterKeySlot(ctx, k).Result(); err != nil || got != want {
			t.Errorf("key %q is in slot %d (%v), its queue's tag in %d", k, got, err, want)
		}
	}
	if len(keys) < 2 {
		t.Errorf("found %d keys; the queues wrote more", len(keys))
	}
}

// TestOnMultiMasterCluster runs queues of 4 shards on a Redis Cluster of
// three masters with a replica each: the conformance suite, the order's
// model test with two nodes and items spread over the shards by their
// ids, and a check that every key the queues wrote is under a shard's
// tag, in that tag's slot, and that the shards' keys live on more than one
// master. The scripts run under the shebang there, so a key of another
// slot than a script's declared keys would fail it, on whichever node.
func TestOnMultiMasterCluster(t *testing.T) {
	t.Parallel()
	const shards = 4
	cluster := redistest.StartClusterOf(t, 3, 1)
	c := cluster.Client(t)
	open := func(t *testing.T, cfg redisqueue.Config) *redisqueue.Queue {
		cfg.Client, cfg.Logger = c, testLogger(t)
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
	t.Run("suite", func(t *testing.T) {
		exerciseSharded(t, shards, open)
	})
	const p = "multi"
	t.Run("order", func(t *testing.T) {
		nodes := [2]*redisqueue.Queue{
			open(t, redisqueue.Config{Consumer: "a", Prefix: p, Capacity: 10_000, Shards: shards}),
			open(t, redisqueue.Config{Consumer: "b", Prefix: p, Capacity: 10_000, Shards: shards}),
		}
		exerciseOrder(t, c, nodes, p, shards, 4, 600)
	})

	ctx := timeout(t, 30*time.Second)
	keys := scanKeys(t, ctx, c, "*")
	for _, k := range keys {
		end := strings.IndexByte(k, '}')
		if end < 0 || !strings.HasPrefix(k, "{sharded-") && !strings.HasPrefix(k, "{"+p+":") {
			t.Errorf("key %q is outside every shard's hash tag", k)
			continue
		}
		if got, want := partition.Slot(k), partition.Slot(k[:end+1]); got != want {
			t.Errorf("key %q is in slot %d, its shard's tag in %d", k, got, want)
		}
	}
	if len(keys) < 2*shards {
		t.Errorf("found %d keys; the queues wrote more", len(keys))
	}
	masters := map[string][]int{}
	for q, tag := range shardTags(t, p, shards) {
		m := cluster.MasterOf(t, tag+":ready").Addr()
		masters[m] = append(masters[m], q)
	}
	t.Logf("shards by master: %v", masters)
	if len(masters) < 2 {
		t.Errorf("the %d shards are on %d master(s): %v; want them spread", shards, len(masters), masters)
	}
}
