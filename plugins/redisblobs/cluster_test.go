package redisblobs_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/blobtest"
	"github.com/weftworks/weft/plugins/redisblobs"
)

// TestConformanceOnCluster runs the blob suite on a real Redis Cluster of
// three masters with a replica each, through a cluster client; then it
// stores modules through one node's client and reads them through
// another's, and checks that the modules, a key each and no hash tag,
// spread over every master.
func TestConformanceOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartClusterOf(t, 3, 1)
	c := cluster.Client(t)
	t.Run("suite", func(t *testing.T) {
		blobtest.Exercise(t, func(t *testing.T) plugins.Blobs {
			return redisblobs.New(c, prefix(t))
		})
	})

	ctx := timeout(t, time.Minute)
	const store = "spread"
	stored, read := redisblobs.New(c, store), redisblobs.New(cluster.Client(t), store)
	hashes := map[string][]byte{}
	for i := range 12 {
		data := fmt.Appendf(nil, "\x00asm module %d", i)
		hash := plugins.Hash(data)
		if err := stored.Put(ctx, hash, data); err != nil {
			t.Fatalf("Put module %d: %v", i, err)
		}
		hashes[hash] = data
	}
	for hash, data := range hashes {
		if got, err := read.Get(ctx, hash); err != nil || !bytes.Equal(got, data) {
			t.Errorf("Get %s through another client: %q, %v; want %q", hash, got, err, data)
		}
	}

	var mu sync.Mutex
	masters := map[string]int{} // master → the modules it holds
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		addr := node.Options().Addr
		n := 0
		iter := node.Scan(ctx, 0, store+":sha256:*", 1000).Iterator()
		for iter.Next(ctx) {
			n++
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("SCAN on %s: %w", addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		if n > 0 {
			masters[addr] = n
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("modules by master: %v", masters)
	total := 0
	for _, n := range masters {
		total += n
	}
	if total != len(hashes) || len(masters) != 3 {
		t.Errorf("the masters hold %d modules (%v), want the %d stored spread over all 3", total, masters, len(hashes))
	}
}
