package redisstore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/internal/store/storetest"
)

// TestConformanceOnCluster runs the store suite through a cluster client
// on a real Redis Cluster of three masters with a replica each, which
// refuses MULTI blocks and commands over keys of several slots, routes
// scripts by their declared key, and fails a script that reaches a key of
// a slot its node does not serve: first as is, then with every write
// waiting for the replica (WaitReplicas: 1, what a production cluster
// runs), each subtest's store under a prefix, and so a slot, of its own.
// Then it checks that every key the suites wrote hashes to its store's
// slot, the guarantee the scripts' undeclared keys rely on, that the
// stores spread over every master, and that the waited stores went
// through WAIT (their sync counter).
func TestConformanceOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartClusterOf(t, 3, 1)
	c := cluster.Client(t)
	var plain, waited atomic.Int64
	t.Run("suite", func(t *testing.T) { exercise(t, c, "cluster", &plain) })
	t.Run("waited", func(t *testing.T) { exerciseWaited(t, c, "waited", &waited) })

	held := keysByMaster(t, c)

	stores := map[string]string{} // store's hash tag → the master that holds it
	synced := 0                   // waited stores with a sync counter
	keys := 0
	for _, addr := range slices.Sorted(maps.Keys(held)) {
		for _, k := range held[addr] {
			keys++
			end := strings.IndexByte(k, '}')
			if end < 0 || !strings.HasPrefix(k, "{cluster-") && !strings.HasPrefix(k, "{waited-") {
				t.Errorf("key %q (on %s) is outside every store's hash tag", k, addr)
				continue
			}
			tag := k[:end+1]
			if got, want := partition.Slot(k), partition.Slot(tag+"schema"); got != want {
				t.Errorf("key %q is in slot %d, its store's schema key in %d", k, got, want)
			}
			if other, ok := stores[tag]; ok && other != addr {
				t.Errorf("the keys of store %s are on %s and %s", tag, other, addr)
			}
			stores[tag] = addr
			if strings.HasPrefix(tag, "{waited-") && k == tag+"sync" {
				synced++
			}
		}
	}
	// Every store has its schema and catalog generation keys; most subtests
	// write a few more (the schedule and grants subtests, three or four).
	opened := int(plain.Load() + waited.Load())
	if opened != len(stores) || keys < 5*len(stores) {
		t.Errorf("found %d keys of %d stores, opened %d stores", keys, len(stores), opened)
	}
	perMaster := map[string]int{}
	for _, addr := range stores {
		perMaster[addr]++
	}
	t.Logf("%d stores (%d keys) by master: %v; %d of %d waited stores wrote through WAIT", len(stores), keys, perMaster, synced, waited.Load())
	if len(perMaster) != 3 {
		t.Errorf("the stores are on %d masters, want all 3: %v", len(perMaster), perMaster)
	}
	if synced == 0 {
		t.Errorf("no waited store has its sync counter: the waited run did not wait")
	}
}

// exerciseWaited runs the conformance suite on c, as exercise does, with
// stores that wait for one replica on every write (within 10s: a loaded
// machine).
func exerciseWaited(t *testing.T, c redis.UniversalClient, name string, n *atomic.Int64) {
	storetest.Exercise(t, func(t *testing.T, now func() time.Time) (store.Store, func() store.Store) {
		prefix := fmt.Sprintf("%s-%d:", name, n.Add(1))
		open := func() *redisstore.Store {
			s, err := redisstore.Open(context.Background(), redisstore.Config{
				Client: c, Prefix: prefix, Now: now, WaitReplicas: 1, WaitTimeout: 10 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = s.Close() })
			return s
		}
		s := open()
		return s, func() store.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open()
			return s
		}
	})
}

// keysByMaster returns every key of the cluster, by the address of the
// master that holds it (SCAN on each).
func keysByMaster(t *testing.T, c *redis.ClusterClient) map[string][]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var mu sync.Mutex
	held := map[string][]string{}
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		var keys []string
		iter := node.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			keys = append(keys, iter.Val())
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("SCAN on %s: %w", node.Options().Addr, err)
		}
		mu.Lock()
		defer mu.Unlock()
		held[node.Options().Addr] = keys
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return held
}
