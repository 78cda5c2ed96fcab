package redistest_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/redistest"
)

// TestStartClusterRefusesCrossSlot: the one-node cluster owns every slot,
// answers a command over one slot and refuses one over two, as a larger
// cluster does, and keeps its slots across a crash.
func TestStartClusterRefusesCrossSlot(t *testing.T) {
	t.Parallel()
	s := redistest.StartCluster(t)
	c := s.ClusterClient(t)
	if err := c.MSet(ctx(t), "{a}x", 1, "{a}y", 2).Err(); err != nil {
		t.Fatalf("MSET over one slot: %v", err)
	}
	plain := s.Client(t)
	if err := plain.MSet(ctx(t), "a", 1, "b", 2).Err(); err == nil || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Fatalf("MSET over two slots = %v, want CROSSSLOT", err)
	}
	s.Kill(t)
	s.Restart(t)
	info, err := s.Client(t).ClusterInfo(ctx(t)).Result()
	if err != nil || !strings.Contains(info, "cluster_slots_assigned:16384") {
		t.Fatalf("after a restart: %v %q, want every slot assigned", err, info)
	}
	if got, err := c.Get(ctx(t), "{a}y").Result(); err != nil || got != "2" {
		t.Fatalf("GET after a restart = %q, %v; want 2", got, err)
	}
}

// TestStartClusterOfPartitions: three masters with a replica each form one
// cluster; a key written through the cluster client is read back through
// it, and keys of different slots live on different masters, which redirect
// a plain client asking for another's key.
func TestStartClusterOfPartitions(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterOf(t, 3, 1)
	masters, replicas := c.Masters(t), c.Replicas(t)
	if len(masters) != 3 || len(replicas) != 3 {
		t.Fatalf("%d masters and %d replicas, want 3 and 3", len(masters), len(replicas))
	}
	for _, s := range c.Nodes() {
		if slices.Contains(masters, s) == slices.Contains(replicas, s) {
			t.Errorf("%s: master %t, replica %t; want one or the other", s.Addr(), slices.Contains(masters, s), slices.Contains(replicas, s))
		}
	}
	for _, m := range masters {
		if r := c.ReplicasOf(t, m); len(r) != 1 || !slices.Contains(replicas, r[0]) {
			t.Errorf("ReplicasOf(%s) = %v, want one of the replicas", m.Addr(), addrs(r))
		}
	}

	// A key of each master's slots, found by asking.
	keyOf := map[*redistest.Server]string{}
	for i := 0; len(keyOf) < len(masters) && i < 100; i++ {
		k := fmt.Sprint("key-", i)
		if m := c.MasterOf(t, k); !slices.Contains(masters, m) {
			t.Fatalf("MasterOf(%q) = %s, not a master", k, m.Addr())
		} else if _, ok := keyOf[m]; !ok {
			keyOf[m] = k
		}
	}
	if len(keyOf) != len(masters) {
		t.Fatalf("100 keys fell on %d masters, want %d", len(keyOf), len(masters))
	}

	cc := c.Client(t)
	for m, k := range keyOf {
		if err := cc.Set(ctx(t), k, "on "+m.Addr(), 0).Err(); err != nil {
			t.Fatalf("SET %s through the cluster client: %v", k, err)
		}
		if got, err := cc.Get(ctx(t), k).Result(); err != nil || got != "on "+m.Addr() {
			t.Errorf("GET %s through the cluster client = %q, %v", k, got, err)
		}
		for _, other := range masters {
			got, err := other.Client(t).Get(ctx(t), k).Result()
			switch {
			case other == m && (err != nil || got != "on "+m.Addr()):
				t.Errorf("GET %s on its master %s = %q, %v", k, m.Addr(), got, err)
			case other != m && (err == nil || !strings.HasPrefix(err.Error(), "MOVED")):
				t.Errorf("GET %s on %s, another master = %q, %v; want MOVED", k, other.Addr(), got, err)
			}
		}
	}
}

// TestStartClusterOfFailsOver: the master of a key's slot crashes after
// its replica acknowledged the key (WAIT 1); the replica is promoted, the
// same cluster client reads the key from it and writes again, and the old
// master, restarted, rejoins as the new master's replica with its data.
func TestStartClusterOfFailsOver(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterOf(t, 3, 1)
	cc := c.Client(t)
	const key = "{failover}k"
	old := c.MasterOf(t, key)
	heirs := c.ReplicasOf(t, old)

	// WAIT counts the replicas that have the writes of its own
	// connection: one pipeline on the master's node client is one.
	node, err := cc.MasterForKey(ctx(t), key)
	if err != nil {
		t.Fatal(err)
	}
	var wait *redis.Cmd
	if _, err := node.Pipelined(ctx(t), func(p redis.Pipeliner) error {
		p.Set(ctx(t), key, "v1", 0)
		wait = p.Do(ctx(t), "WAIT", 1, (10 * time.Second).Milliseconds())
		return nil
	}); err != nil {
		t.Fatalf("SET + WAIT 1 on %s: %v", node.Options().Addr, err)
	}
	if acks, err := wait.Int(); err != nil || acks != 1 {
		t.Fatalf("WAIT 1 on %s = %d replicas, %v; want 1", node.Options().Addr, acks, err)
	}

	if killed := c.KillMasterOf(t, key); killed != old {
		t.Fatalf("KillMasterOf killed %s, MasterOf said %s", killed.Addr(), old.Addr())
	}
	heir := c.WaitFailover(t, key)
	if !slices.Contains(heirs, heir) {
		t.Fatalf("after the failover %s serves %q, want its old replica (%v)", heir.Addr(), key, addrs(heirs))
	}
	if got, err := cc.Get(ctx(t), key).Result(); err != nil || got != "v1" {
		t.Fatalf("GET %s through the same client after the failover = %q, %v; want v1", key, got, err)
	}
	if err := cc.Set(ctx(t), key, "v2", 0).Err(); err != nil {
		t.Fatalf("SET %s after the failover: %v", key, err)
	}

	old.Restart(t)
	c.WaitHealthy(t)
	if r := c.ReplicasOf(t, heir); !slices.Contains(r, old) {
		t.Fatalf("after its restart %s is not a replica of %s (its replicas: %v)", old.Addr(), heir.Addr(), addrs(r))
	}
	if m := c.Masters(t); len(m) != 3 || slices.Contains(m, old) {
		t.Fatalf("masters after the restart: %v, want 3 without %s", addrs(m), old.Addr())
	}
	// A replica answers reads of its master's slots once asked READONLY on
	// the connection: the restarted node has the new master's data.
	var got *redis.StringCmd
	if _, err := old.Client(t).Pipelined(ctx(t), func(p redis.Pipeliner) error {
		p.ReadOnly(ctx(t))
		got = p.Get(ctx(t), key)
		return nil
	}); err != nil || got.Val() != "v2" {
		t.Fatalf("GET %s on the restarted replica = %q, %v; want v2", key, got.Val(), err)
	}
}

func addrs(servers []*redistest.Server) []string {
	out := make([]string, len(servers))
	for i, s := range servers {
		out[i] = s.Addr()
	}
	return out
}
