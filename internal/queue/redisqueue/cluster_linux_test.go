package redisqueue_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/queuetest"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// TestOnCluster runs the conformance suite and the order's model test
// through a ClusterClient on a one-node Redis Cluster, which refuses a
// script that touches keys of another slot than its declared keys' (the
// pop script computes the lanes' names), then checks that every key the
// queues wrote is in its queue's slot.
func TestOnCluster(t *testing.T) {
	t.Parallel()
	c := startClusterNode(t)
	var n atomic.Int64
	open := func(t *testing.T, cfg redisqueue.Config) *redisqueue.Queue {
		cfg.Client, cfg.Logger = c, testLogger(t)
		q, err := redisqueue.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := q.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return q
	}
	t.Run("suite", func(t *testing.T) {
		queuetest.Exercise(t, func(t *testing.T, capacity int) queue.Queue {
			return open(t, redisqueue.Config{Consumer: "node-1", Capacity: capacity, Prefix: fmt.Sprintf("cluster-%d", n.Add(1))})
		})
	})
	t.Run("order", func(t *testing.T) {
		p := fmt.Sprintf("cluster-%d", n.Add(1))
		nodes := [2]*redisqueue.Queue{
			open(t, redisqueue.Config{Consumer: "a", Prefix: p, Capacity: 10_000}),
			open(t, redisqueue.Config{Consumer: "b", Prefix: p, Capacity: 10_000}),
		}
		exerciseOrder(t, c, nodes, p, 4, 600)
	})

	ctx := timeout(t, 30*time.Second)
	keys := scanKeys(t, ctx, c, "*")
	for _, k := range keys {
		end := strings.IndexByte(k, '}')
		if !strings.HasPrefix(k, "{cluster-") || end < 0 {
			t.Errorf("key %q is outside every queue's hash tag", k)
			continue
		}
		want, err := c.ClusterKeySlot(ctx, k[:end+1]).Result()
		if err != nil {
			t.Fatal(err)
		}
		if got, err := c.ClusterKeySlot(ctx, k).Result(); err != nil || got != want {
			t.Errorf("key %q is in slot %d (%v), its queue's tag in %d", k, got, err, want)
		}
	}
	if len(keys) < 2 {
		t.Errorf("found %d keys; the queues wrote more", len(keys))
	}
}

// clusterNode is a redis-server process in cluster mode.
type clusterNode struct {
	addr   string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{}
}

func (n *clusterNode) logTail() string {
	b, _ := os.ReadFile(filepath.Join(n.dir, "redis.log"))
	return string(b)
}

// stop ends the process (SIGTERM, then SIGKILL after 30s) and waits.
func (n *clusterNode) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
	case <-time.After(30 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.exited
	}
}

// startClusterNode starts a redis-server in cluster mode owning all 16384
// slots (a one-node Redis Cluster, which refuses cross-slot commands and
// scripts like a larger one) and returns a ClusterClient on it. The
// store's tests start theirs the same way (internal/store/redisstore);
// internal/redistest starts plain servers only.
func startClusterNode(t *testing.T) *redis.ClusterClient {
	t.Helper()
	var n *clusterNode
	var errs []error
	for range 5 { // a port found free may be taken before the server binds it
		var err error
		if n, err = tryStartClusterNode(t); err == nil {
			break
		}
		errs = append(errs, err)
	}
	if n == nil {
		t.Fatalf("starting a cluster node: %v", errors.Join(errs...))
	}
	t.Cleanup(n.stop)
	node := redis.NewClient(&redis.Options{Addr: n.addr, DialTimeout: time.Second, MaxRetries: -1})
	defer node.Close()
	ctx := context.Background()
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %v", n.addr, err)
	}
	waitFor(t, n, "cluster_state:ok", func() bool {
		info, err := node.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{n.addr}, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// tryStartClusterNode starts a node on fresh ports and waits until it
// answers PING; it fails when the process exits first (a port taken in
// between) or does not answer within 30s.
func tryStartClusterNode(t *testing.T) (*clusterNode, error) {
	t.Helper()
	dir := t.TempDir()
	port, bus, err := freePorts()
	if err != nil {
		return nil, err
	}
	n := &clusterNode{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, exited: make(chan struct{})}
	n.cmd = exec.Command(redistest.Binary,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction",
		"--logfile", filepath.Join(dir, "redis.log"))
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", redistest.Binary, err)
	}
	go func() { _ = n.cmd.Wait(); close(n.exited) }()
	c := redis.NewClient(&redis.Options{Addr: n.addr, DialTimeout: time.Second, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(30 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		select {
		case <-n.exited:
			return nil, fmt.Errorf("cluster node on %s exited before answering:\n%s", n.addr, n.logTail())
		case <-time.After(10 * time.Millisecond): // polling the server's state
		}
		if time.Now().After(deadline) {
			n.stop()
			return nil, fmt.Errorf("cluster node on %s did not answer within 30s:\n%s", n.addr, n.logTail())
		}
	}
	return n, nil
}

// waitFor polls ok until it holds, failing the test when the node exits
// or 30s pass.
func waitFor(t *testing.T, n *clusterNode, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		select {
		case <-n.exited:
			t.Fatalf("cluster node on %s exited while waiting for %s:\n%s", n.addr, what, n.logTail())
		case <-time.After(10 * time.Millisecond): // polling the server's state
		}
		if time.Now().After(deadline) {
			t.Fatalf("cluster node on %s: timed out waiting for %s:\n%s", n.addr, what, n.logTail())
		}
	}
}

// freePorts returns two distinct loopback ports that were free a moment
// ago.
func freePorts() (int, int, error) {
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, 0, fmt.Errorf("finding a free port: %w", err)
		}
		defer l.Close() // both held until both are picked: they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1], nil
}
