package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/redistest"
)

// TestPingMastersNamesTheFailingNode: the readiness check of a node on a
// Redis Cluster passes while every master answers, and once one does not,
// its error names that master's address and the cluster's seeds, which is
// what /readyz shows an operator.
func TestPingMastersNamesTheFailingNode(t *testing.T) {
	t.Parallel()
	srv := redistest.StartCluster(t)
	cc := srv.ClusterClient(t)
	where := "the redis cluster at " + srv.Addr()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := pingMasters(ctx, cc, where); err != nil {
		t.Fatalf("pingMasters on a healthy cluster: %v", err)
	}
	// The client keeps the slots it read: the master is still listed,
	// and its ping fails.
	srv.Kill(t)
	err := pingMasters(ctx, cc, where)
	if err == nil {
		t.Fatal("pingMasters passed with the cluster's only master killed")
	}
	t.Logf("a killed master: %v", err)
	for _, want := range []string{where + ": ", "redis cluster master " + srv.Addr() + ": "} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("pingMasters: %v, want %q in it", err, want)
		}
	}
}
