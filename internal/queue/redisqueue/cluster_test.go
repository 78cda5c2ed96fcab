package redisqueue_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/queuetest"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// TestOnCluster runs the conformance suite and the order's model test
// through a ClusterClient on a one-node Redis Cluster, which refuses a
// script that touches keys of another slot than its declared keys' (the
// pop script computes the lanes' names), then checks that every key the
// queues wrote is in its queue's slot.
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
		exerciseOrder(t, c, nodes, p, 4, 600)
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
