package redistest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// WithClusterNodeTimeout sets cluster-node-timeout: how long a cluster node
// may stay silent before the others count it as failing, and so about how
// long a failover takes to begin. [StartClusterOf] sets 1s, so that a
// failover test waits seconds rather than Redis's default 15s. Start fails
// the test unless d is a positive whole number of milliseconds.
func WithClusterNodeTimeout(d time.Duration) Option {
	return func(c *config) { c.nodeTimeout, c.nodeTimeoutSet = d, true }
}

// StartCluster starts a redis-server in cluster mode that owns all 16384
// slots, as Start starts a plain one (same options, same controls: Kill and
// Restart keep its slots, which its nodes.conf holds), and waits until the
// cluster's state is ok. A one-node Redis Cluster refuses commands,
// transactions and scripts over keys of several slots as a larger one does,
// which is what a test of cluster-safe key layouts needs; talk to it with
// ClusterClient.
func StartCluster(t testing.TB, opts ...Option) *Server {
	t.Helper()
	s := Start(t, append(opts, func(c *config) { c.cluster = true })...)
	c := s.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), startPatience)
	defer cancel()
	if err := c.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("redistest: CLUSTER ADDSLOTSRANGE on %s: %v\n%s", s.Addr(), err, s.logTail())
	}
	for {
		info, err := c.ClusterInfo(ctx).Result()
		if err == nil && strings.Contains(info, "cluster_state:ok") {
			return s
		}
		select {
		case <-ctx.Done():
			t.Fatalf("redistest: the cluster node on %s is not ok after %s: %v %q\n%s", s.Addr(), startPatience, err, info, s.logTail())
		case <-time.After(10 * time.Millisecond): // polling the server's state
		}
	}
}

// ClusterClient returns a go-redis cluster client of a server started by
// StartCluster, closed when the test ends.
func (s *Server) ClusterClient(t testing.TB) *redis.ClusterClient {
	t.Helper()
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{s.Addr()}, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}
