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

// TestShardsNeedRedis7: the version check that refuses shards on a Redis
// older than 7.0, and the INFO field it reads.
func TestShardsNeedRedis7(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]bool{"7.0.15": true, "7.2.4": true, "10.0.0": true, "6.2.14": false, "6": false, "": false, "x.y": false} {
		if got := atLeast7(v); got != want {
			t.Errorf("atLeast7(%q) = %v, want %v", v, got, want)
		}
	}
	info := "# Server\r\nredis_version:7.0.15\r\nredis_git_sha1:00000000\r\n"
	if got := infoField(info, "redis_version"); got != "7.0.15" {
		t.Errorf("infoField(redis_version) = %q", got)
	}
	if got := infoField(info, "nothing"); got != "" {
		t.Errorf("infoField(nothing) = %q", got)
	}
}
