package redisstore_test

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

	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/storetest"
)

// freePorts returns two distinct loopback ports that were free a moment
// ago.
func freePorts(t *testing.T) (int, int) {
	t.Helper()
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close() // both held until both are picked: they differ
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1]
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

// tryStartClusterNode starts a node on fresh ports and waits until it
// answers PING; it fails when the process exits first (a port taken in
// between) or does not answer within 30s.
func tryStartClusterNode(t *testing.T) (*clusterNode, error) {
	t.Helper()
	dir := t.TempDir()
	port, bus := freePorts(t)
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

// startClusterNode starts a redis-server in cluster mode owning all 16384
// slots: a one-node Redis Cluster, which refuses commands and MULTI blocks
// over several slots like a larger one. internal/redistest starts plain
// servers only.
func startClusterNode(t *testing.T) *redis.ClusterClient {
	t.Helper()
	var n *clusterNode
	var errs []error
	for range 5 {
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
	addr, exited, logTail := n.addr, n.exited, n.logTail

	node := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, MaxRetries: -1})
	defer node.Close()
	ctx := context.Background()
	deadline := time.Now().Add(30 * time.Second)
	wait := func(what string, ok func() bool) {
		t.Helper()
		for !ok() {
			select {
			case <-exited:
				t.Fatalf("cluster node on %s exited while %s:\n%s", addr, what, logTail())
			case <-time.After(10 * time.Millisecond): // polling the server's state
			}
			if time.Now().After(deadline) {
				t.Fatalf("cluster node on %s: timed out %s:\n%s", addr, what, logTail())
			}
		}
	}
	if err := node.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", 0, 16383).Err(); err != nil {
		t.Fatalf("CLUSTER ADDSLOTSRANGE on %s: %v", addr, err)
	}
	wait("waiting for cluster_state:ok", func() bool {
		info, err := node.ClusterInfo(ctx).Result()
		return err == nil && strings.Contains(info, "cluster_state:ok")
	})
	c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{addr}, DialTimeout: time.Second, ReadTimeout: 2 * time.Second})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestConformanceOnCluster runs the store suite through a ClusterClient on
// a Redis Cluster node, which refuses MULTI blocks and commands over keys
// of several slots and routes scripts by their declared key; then it
// checks that every key the suite wrote hashes to its store's slot, the
// guarantee the scripts' undeclared keys rely on.
func TestConformanceOnCluster(t *testing.T) {
	t.Parallel()
	c := startClusterNode(t)
	var n atomic.Int64
	t.Run("suite", func(t *testing.T) {
		storetest.Exercise(t, func(t *testing.T, now func() time.Time) (store.Store, func() store.Store) {
			prefix := fmt.Sprintf("cluster-%d:", n.Add(1))
			s := open(t, c, prefix, now)
			reopen := func() store.Store {
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				s = open(t, c, prefix, now)
				return s
			}
			return s, reopen
		})
	})

	ctx := context.Background()
	slots := map[string]int64{} // prefix → slot of its schema key
	keys := 0
	// One master: the callback runs once, so it may use the maps unlocked.
	err := c.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		iter := node.Scan(ctx, 0, "*", 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			keys++
			end := strings.IndexByte(k, '}')
			if !strings.HasPrefix(k, "{cluster-") || end < 0 {
				t.Errorf("key %q is outside every store's hash tag", k)
				continue
			}
			tag := k[:end+1]
			want, ok := slots[tag]
			if !ok {
				var err error
				if want, err = node.ClusterKeySlot(ctx, tag+"schema").Result(); err != nil {
					return err
				}
				slots[tag] = want
			}
			got, err := node.ClusterKeySlot(ctx, k).Result()
			if err != nil {
				return err
			}
			if got != want {
				t.Errorf("key %q is in slot %d, its store's schema key in %d", k, got, want)
			}
		}
		return iter.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every store has its schema and catalog generation keys; most subtests
	// write a few more (the schedule and grants subtests, three or four).
	if int(n.Load()) != len(slots) || keys < 5*len(slots) {
		t.Errorf("found %d keys of %d stores, opened %d stores", keys, len(slots), n.Load())
	}
}
