package redisstore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/redistest"
)

// TestConformanceOnCluster runs the store suite through a ClusterClient on
// a Redis Cluster node, which refuses MULTI blocks and commands over keys
// of several slots and routes scripts by their declared key; then it
// checks that every key the suite wrote hashes to its store's slot, the
// guarantee the scripts' undeclared keys rely on.
func TestConformanceOnCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t).ClusterClient(t)
	var n atomic.Int64
	t.Run("suite", func(t *testing.T) { exercise(t, c, "cluster", &n) })

	ctx := context.Background()
	slots := map[string]int64{} // prefix → slot of its schema key
	keys := 0
	// One master: the callback runs once, so it may use the maps unlocked.
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			keys++
			end := strings.IndexByte(k, '}')
			if !strings.HasPrefix(k, "{cluster-") || end < 0 {
				t.Errorf("key %q is outside every store's hash tag", k)
				continue
			}
			tag := k[:end+1]
			want, ok := slots[tag]
			if !ok {
				var err error
				if want, err = node.ClusterKeySlot(ctx, tag+"schema").Result(); err != nil {
					return err
				}
				slots[tag] = want
			}
			got, err := node.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				return err
			}
			if got != want {
				t.Errorf("key %q is in slot %d, its store's schema key in %d", k, got, want)
			}
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every store has its schema and catalog generation keys; most subtests
	// write a few more (the schedule and grants subtests, three or four).
	if int(n.Load()) != len(slots) || keys < 5*len(slots) {
		t.Errorf("found %d keys of %d stores, opened %d stores", keys, len(slots), n.Load())
	}
}
