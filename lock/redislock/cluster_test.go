package redislock_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/locktest"
	"github.com/weftworks/weft/lock/redislock"
)

// TestConformanceOnCluster runs the lock suite on a real Redis Cluster of
// three masters with a replica each, through a cluster client per Locker
// (a node) as its one vote: Config.Clients holds the cluster client
// alone. Then it checks where the keys land: a lock's mutex and fence
// counter on one master (its scripts declare both keys), the locks of
// different keys spread over every master, and a key that begins with a
// hash tag on the master of the data of that tag; and that one batch
// extends leases held on every master.
func TestConformanceOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartClusterOf(t, 3, 1)
	newClusterLocker := func(t *testing.T, prefix string) lock.Locker {
		l, err := redislock.New(redislock.Config{
			Clients: []redis.UniversalClient{cluster.Client(t)}, Prefix: prefix, Logger: discard(),
		})
		if err != nil {
			t.Fatalf("New: %v", err)
		}
		return l
	}
	t.Run("suite", func(t *testing.T) {
		locktest.Exercise(t, func(t *testing.T) lock.Locker { return newClusterLocker(t, "") })
	})

	const prefix = "spread:"
	l := newClusterLocker(t, prefix)
	c := cluster.Client(t)
	// A record of the data a tagged lock guards, written by the cluster
	// client to the master of its slot.
	const data = "{spread-data}record"
	if err := c.Set(ctx(t), data, "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	keys := []string{"{spread-data}instance:1"}
	for i := range 12 {
		keys = append(keys, fmt.Sprintf("workflow-instance:%d", i))
	}
	leases := make([]lock.Lease, len(keys))
	for i, k := range keys {
		ls, err := l.Acquire(ctx(t), k, time.Minute)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", k, err)
		}
		leases[i] = ls
	}
	defer func() {
		for _, ls := range leases {
			ls.Release(ctx(t))
		}
	}()

	at := keysByMaster(t, c) // key → the master that holds it
	mutex := func(k string) string {
		if strings.HasPrefix(k, "{") {
			return "spread:lock:" + k
		}
		return "spread:lock:{" + k + "}"
	}
	masters := map[string][]string{} // master → the lock keys it holds
	for _, k := range keys {
		m, f := at[mutex(k)], at[mutex(k)+":fence"]
		switch {
		case m == "" || f == "":
			t.Errorf("lock %q: mutex %q on %q, fence counter on %q; want both held", k, mutex(k), m, f)
		case m != f:
			t.Errorf("lock %q: mutex on %s, fence counter on %s; want one master", k, m, f)
		}
		masters[m] = append(masters[m], k)
	}
	if m := at[mutex(keys[0])]; m != at[data] {
		t.Errorf("lock %q is on %s, the data of its tag (%q) on %s; want one master", keys[0], m, data, at[data])
	}
	t.Logf("locks by master: %v", masters)
	if len(masters) != 3 {
		t.Errorf("the locks of %d keys are on %d master(s), want all 3: %v", len(keys), len(masters), masters)
	}

	// One batch extends them all, past their first ttl.
	errs := l.(lock.BatchExtender).ExtendLeases(ctx(t), leases, 2*time.Minute)
	for i, err := range errs {
		if err != nil {
			t.Errorf("ExtendLeases: lease %q: %v", keys[i], err)
		}
	}
	for _, k := range keys {
		if pttl, err := c.PTTL(ctx(t), mutex(k)).Result(); err != nil || pttl <= time.Minute {
			t.Errorf("PTTL %s after the batch = %s, %v; want above a minute", mutex(k), pttl, err)
		}
	}
}

// keysByMaster returns every key of c's masters with the address of the
// master that holds it.
func keysByMaster(t *testing.T, c *redis.ClusterClient) map[string]string {
	t.Helper()
	var mu sync.Mutex
	at := map[string]string{}
	err := c.ForEachMaster(ctx(t), func(ctx context.Context, node *redis.Client) error {
		addr := node.Options().Addr
		iter := node.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			mu.Lock()
			at[iter.Val()] = addr
			mu.Unlock()
		}
		if err := iter.Err(); err != nil {
			return fmt.Errorf("SCAN on %s: %w", addr, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return at
}
