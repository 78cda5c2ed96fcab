package redisstore_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
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

// openPartitioned opens a partitioned store of n partitions on c under
// prefix with clock now.
func openPartitioned(t testing.TB, c redis.UniversalClient, prefix string, n int, now func() time.Time) *redisstore.Partitioned {
	t.Helper()
	s, err := redisstore.OpenPartitioned(context.Background(), redisstore.PartitionedConfig{
		Config: redisstore.Config{Client: c, Prefix: prefix, Now: now}, Partitions: n,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// exercisePartitioned runs the conformance suite on partitioned stores of
// n partitions on c, each subtest under a prefix of its own.
func exercisePartitioned(t *testing.T, c redis.UniversalClient, name string, n int, count *atomic.Int64) {
	storetest.Exercise(t, func(t *testing.T, now func() time.Time) (store.Store, func() store.Store) {
		prefix := fmt.Sprintf("%s-%d:", name, count.Add(1))
		s := openPartitioned(t, c, prefix, n, now)
		return s, func() store.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = openPartitioned(t, c, prefix, n, now)
			return s
		}
	})
}

// TestPartitionedConformance runs the store suite on a partitioned store
// of four partitions on one redis-server: the router must answer every
// call as a whole store does.
func TestPartitionedConformance(t *testing.T) {
	t.Parallel()
	exercisePartitioned(t, redistest.Start(t).Client(t), "parts", 4, new(atomic.Int64))
}

// TestPartitionedConformanceOnCluster runs the store suite on partitioned
// stores of eight partitions on a Redis Cluster of three masters with a
// replica each, which fails any command or script over keys of two slots.
// Then it checks that every key of a store is under the catalog's tag or
// one of its partitions' and that the partitions spread over every master.
func TestPartitionedConformanceOnCluster(t *testing.T) {
	t.Parallel()
	cluster := redistest.StartClusterOf(t, 3, 1)
	c := cluster.Client(t)
	const n = 8
	var count atomic.Int64
	t.Run("suite", func(t *testing.T) { exercisePartitioned(t, c, "pc", n, &count) })

	held := keysByMaster(t, c)
	tags := map[string]bool{}
	for i := range count.Load() {
		prefix := fmt.Sprintf("pc-%d:", i+1)
		tags["{"+prefix+"}"] = true
		pt, err := partition.Tags(prefix, n)
		if err != nil {
			t.Fatal(err)
		}
		for _, tag := range pt {
			tags[tag] = true
		}
	}
	partsOn := map[string]int{} // master → keys of partitions on it
	for _, addr := range slices.Sorted(maps.Keys(held)) {
		for _, k := range held[addr] {
			end := strings.IndexByte(k, '}')
			if end < 0 || !tags[k[:end+1]] {
				t.Errorf("key %q (on %s) is under no tag of the stores", k, addr)
				continue
			}
			if strings.Contains(k[:end], "~") {
				partsOn[addr]++
			}
		}
	}
	t.Logf("keys of partitions by master: %v", partsOn)
	if len(partsOn) != 3 {
		t.Errorf("the partitions' keys are on %d masters, want 3: %v", len(partsOn), partsOn)
	}
}

// TestPartitionedOpenRefusesAnotherLayout: a partitioned store is not
// opened whole, nor with another number of partitions. (A whole store
// opened as partitioned is moved: migratepartitions_test.go.)
func TestPartitionedOpenRefusesAnotherLayout(t *testing.T) {
	t.Parallel()
	c := redistest.Start(t).Client(t)
	ctx := t.Context()
	for _, tt := range []struct {
		name string
		open func() error
		want string
	}{
		{"a partitioned store whole", func() error {
			openPartitioned(t, c, "parted:", 4, time.Now)
			_, err := redisstore.Open(ctx, redisstore.Config{Client: c, Prefix: "parted:"})
			return err
		}, "is divided into partitions: open it with them"},
		{"another number of partitions", func() error {
			_, err := redisstore.OpenPartitioned(ctx, redisstore.PartitionedConfig{Config: redisstore.Config{Client: c, Prefix: "parted:"}, Partitions: 8})
			return err
		}, "has 4 partitions, not 8"},
		{"one partition", func() error {
			_, err := redisstore.OpenPartitioned(ctx, redisstore.PartitionedConfig{Config: redisstore.Config{Client: c, Prefix: "one:"}, Partitions: 1})
			return err
		}, "Partitions must be from 2 to 1024, got 1"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.open()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}
