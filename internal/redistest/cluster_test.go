package redistest_test

import (
	"strings"
	"testing"

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
