package node_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/testplugins"
)

// redisClusterNode opens a node of a cluster on the Redis Cluster whose
// seed addresses are seeds, configured as clusterNode is otherwise.
func redisClusterNode(t *testing.T, id string, seeds ...string) *node.Node {
	t.Helper()
	cfg := clusterConfig(t, id)
	cfg.RedisCluster = seeds
	n, _, _ := open(t, cfg)
	return n
}

// TestTwoNodesOnARedisCluster: two nodes given one seed address of a
// Redis Cluster of three masters share one store, queue, bus and lock
// server through go-redis's cluster client, which found the other masters
// with CLUSTER SLOTS and sends each key to its slot's master (a command
// over keys of two slots would fail with CROSSSLOT). Work started through
// one node completes, each instance's lock and fencing counter are in the
// cluster, and both nodes are ready, which needs every master to answer.
func TestTwoNodesOnARedisCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartClusterOf(t, 3, 0)
	seed := cl.Addrs()[1]
	a := redisClusterNode(t, "a", seed)
	b := redisClusterNode(t, "b", seed)
	ctx := context.Background()
	for _, n := range []*node.Node{a, b} {
		waitFor(t, func() (error, bool) { err := n.Ready(ctx); return err, err == nil })
	}
	if _, _, err := a.PutPlugin(ctx, "kit", testplugins.Bytes(t, "kit")); err != nil {
		t.Fatal(err)
	}
	if _, _, err := a.Engine().SaveDefinition(ctx, []byte(greet)); err != nil {
		t.Fatal(err)
	}
	// Started through b, with a definition and plugin a stored.
	var ids []string
	for range 8 {
		inst, _, err := b.Engine().Start(ctx, "greet", json.RawMessage(`"hi"`), "")
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, inst.ID)
	}
	nodes := map[string]bool{}
	cc := cl.Client(t)
	fences := map[string]int{} // by the master that holds them
	for _, id := range ids {
		done := waitFor(t, func() (*weft.Instance, bool) {
			inst, err := a.Store().GetInstance(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			return inst, inst.Status.Terminal()
		})
		if done.Status != weft.StatusCompleted || string(done.Output) != `"HI"` {
			t.Fatalf("instance %s: %s with %s, want completed with \"HI\"", id, done.Status, done.Output)
		}
		hist, err := a.Store().History(ctx, id, 0, 100)
		if err != nil {
			t.Fatal(err)
		}
		for _, ev := range hist {
			if ev.Type == "activity_completed" {
				nodes[ev.Node] = true
			}
		}
		// The instance lock went through the cluster client too.
		fence := "weft:lock:{" + engine.InstanceLockKey(id) + "}:fence"
		if n, err := cc.Exists(ctx, fence).Result(); err != nil || n != 1 {
			t.Errorf("the lock's fencing counter %s: exists %d, %v; want it in the cluster", fence, n, err)
		}
		fences[cl.MasterOf(t, fence).Addr()]++
	}
	t.Logf("activities ran on nodes %v; the fencing counters are on masters %v", nodes, fences)

	// Only the seed was given: the client asked the cluster for its slots.
	var slots int
	for _, s := range cl.Nodes() {
		info, err := s.Client(t).Info(ctx, "commandstats").Result()
		if err != nil {
			t.Fatal(err)
		}
		slots += strings.Count(info, "cmdstat_cluster|slots:calls=")
	}
	if slots == 0 {
		t.Error("no CLUSTER SLOTS call in any node's command stats: the nodes did not discover the slots")
	}
	// What /readyz asks, after the work.
	for name, n := range map[string]*node.Node{"a": a, "b": b} {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := n.Ready(rctx)
		cancel()
		if err != nil {
			t.Errorf("node %s on the cluster is not ready: %v", name, err)
		}
	}
}
