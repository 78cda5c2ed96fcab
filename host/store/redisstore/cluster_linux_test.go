package redisstore_test

import (
	"context"
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

	"github.com/weftworks/weft/host/store"
	"github.com/weftworks/weft/host/store/storetest"
	"github.com/weftworks/weft/internal/redistest"
)

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// startClusterNode starts a redis-server in cluster mode owning all 16384
// slots: a one-node Redis Cluster, which enforces the cluster's rules
// (CROSSSLOT for commands, MULTI and scripts touching keys of several
// slots) like a larger one. internal/redistest starts plain servers only.
func startClusterNode(t *testing.T) *redis.ClusterClient {
	t.Helper()
	dir := t.TempDir()
	port, bus := freePort(t), freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(redistest.Binary,
		"--bind", "127.0.0.1", "--port", strconv.Itoa(port), "--dir", dir,
		"--cluster-enabled", "yes", "--cluster-port", strconv.Itoa(bus),
		"--cluster-config-file", filepath.Join(dir, "nodes.conf"),
		"--appendonly", "yes", "--save", "", "--maxmemory-policy", "noeviction",
		"--logfile", filepath.Join(dir, "redis.log"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", redistest.Binary, err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
	})
	logTail := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
		return string(b)
	}

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
	wait("starting", func() bool { return node.Ping(ctx).Err() == nil })
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
	if int(n.Load()) != len(slots) || keys < 10*len(slots) {
		t.Errorf("found %d keys of %d stores, opened %d stores", keys, len(slots), n.Load())
	}
}
