package redisstore_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/redisstore"
)

// replicated starts a redis-server and a replica of it, and waits until
// the replica is in sync.
func replicated(t *testing.T) (master, replica *redistest.Server) {
	return replicatedB(t)
}

// replicatedB is replicated for a test or a benchmark.
func replicatedB(t testing.TB) (master, replica *redistest.Server) {
	t.Helper()
	master, replica = redistest.Start(t), redistest.Start(t)
	host, port, err := net.SplitHostPort(master.Addr())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := replica.Client(t).Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatalf("REPLICAOF: %v", err)
	}
	mc, rc := master.Client(t), replica.Client(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		// Online, and done with the AOF rewrite that follows the first
		// sync: a replica refuses to shut down during it, which would
		// hold up the test's end.
		info, err := mc.Info(ctx, "replication").Result()
		if err == nil {
			var persistence string
			persistence, err = rc.Info(ctx, "persistence").Result()
			info += persistence
		}
		if err == nil && strings.Contains(info, "connected_slaves:1") && strings.Contains(info, "state=online") &&
			strings.Contains(info, "aof_rewrite_in_progress:0") && strings.Contains(info, "aof_rewrite_scheduled:0") {
			return master, replica
		}
		if time.Now().After(deadline) {
			t.Fatalf("the replica is not online after 30s: %v %q", err, info)
		}
		time.Sleep(10 * time.Millisecond) // polling the master's replication state
	}
}

// openWaiting opens a store on c that waits for one replica.
func openWaiting(t *testing.T, c redis.UniversalClient, prefix string, timeout time.Duration) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), redisstore.Config{Client: c, Prefix: prefix, WaitReplicas: 1, WaitTimeout: timeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestWaitReplicasConformance runs the store suite with every write waiting
// for the replica: the waited path answers as the plain one does.
func TestWaitReplicasConformance(t *testing.T) {
	t.Parallel()
	master, _ := replicated(t)
	exerciseWaited(t, master.Client(t), "waited", new(atomic.Int64))
}

// TestWaitReplicas: an answered write is on the replica; with the replica
// stopped, a write, a refusal and a barrier each fail as not durable
// rather than answer; once it is back, they answer again.
func TestWaitReplicas(t *testing.T) {
	t.Parallel()
	master, replica := replicated(t)
	ctx := t.Context()
	// Two stores on the same keys: one whose short wait the stopped
	// replica fails, one patient enough for a loaded machine, for what
	// must succeed.
	s := openWaiting(t, master.Client(t), "w:", 300*time.Millisecond)
	patient := openWaiting(t, master.Client(t), "w:", 10*time.Second)
	rc := replica.Client(t)
	createIn := func(st *redisstore.Store, id string) error {
		_, err := st.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: id, Workflow: "wf", Version: 1, Status: weft.StatusPending}, At: time.Now()})
		return err
	}
	create := func(id string) error { return createIn(s, id) }
	onReplica := func(id string) bool {
		n, err := rc.Exists(ctx, "{w:}i:"+id).Result()
		if err != nil {
			t.Fatalf("reading the replica: %v", err)
		}
		return n == 1
	}

	if err := createIn(patient, "a"); err != nil {
		t.Fatalf("create with the replica up: %v", err)
	}
	if !onReplica("a") {
		t.Fatal("an answered create is not on the replica")
	}

	replica.Pause(t)
	notDurable := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, store.ErrNotDurable) || !errors.Is(err, weft.ErrUnavailable) {
			t.Fatalf("%s with the replica stopped: got %v, want an error matching ErrNotDurable and ErrUnavailable", what, err)
		}
		if !strings.Contains(err.Error(), "0 of 1 replicas") {
			t.Errorf("%s: the message %q does not say how many replicas confirmed", what, err)
		}
	}
	notDurable("a create", create("b"))
	// The refusal of a create whose id exists is not answered either: the
	// create it refers to might be lost.
	notDurable("a refused create", create("a"))
	notDurable("a barrier", s.Barrier(ctx))
	replica.Resume(t)

	// "b" was applied on the master: its retry is refused, durably now.
	if err := createIn(patient, "b"); !errors.Is(err, weft.ErrExists) {
		t.Fatalf("retrying create b after the replica came back: %v, want ErrExists", err)
	}
	if !onReplica("b") {
		t.Fatal("b's refusal was answered before b was on the replica")
	}
	if err := patient.Barrier(ctx); err != nil {
		t.Fatalf("barrier with the replica back: %v", err)
	}
}

// TestWaitReplicasNone: a store that waits for a replica it does not have
// answers no write.
func TestWaitReplicasNone(t *testing.T) {
	t.Parallel()
	s := openWaiting(t, redistest.Start(t).Client(t), "none:", 50*time.Millisecond)
	_, err := s.Commit(t.Context(), store.Commit{Instance: &weft.Instance{ID: "a", Workflow: "wf", Version: 1, Status: weft.StatusPending}, At: time.Now()})
	if !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("create without a replica: %v, want ErrNotDurable", err)
	}
	if !strings.Contains(err.Error(), "50ms") {
		t.Errorf("the message %q does not name the timeout", err)
	}
}

// TestWaitReplicasFollowsAManualFailover: after a manual failover (CLUSTER
// FAILOVER on the replica, the old master demoted and answering MOVED), a
// waited write sent to the old master by a stale slot map reads the map
// again and lands on the new master: it succeeds, rather than failing as
// an error the API would answer 500.
func TestWaitReplicasFollowsAManualFailover(t *testing.T) {
	t.Parallel()
	cl := redistest.StartClusterOf(t, 3, 1)
	// A client of its own, which the cluster's helpers do not refresh,
	// whose slot map goes stale for a minute unless it reads it again.
	opts := cl.Options()
	opts.ClusterStateReloadInterval = time.Minute
	c := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	s := openWaiting(t, c, "mf:", 10*time.Second)
	ctx := t.Context()
	create := func(id string) error {
		_, err := s.Commit(ctx, store.Commit{Instance: &weft.Instance{ID: id, Workflow: "wf", Version: 1, Status: weft.StatusPending}, At: time.Now()})
		return err
	}
	if err := create("a"); err != nil {
		t.Fatalf("create before the failover: %v", err)
	}
	old := cl.MasterOf(t, "{mf:}schema")
	replica := cl.ReplicasOf(t, old)[0]
	if err := replica.Client(t).Do(ctx, "CLUSTER", "FAILOVER").Err(); err != nil {
		t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.Addr(), err)
	}
	role := func(srv *redistest.Server) string {
		info, err := srv.Client(t).Info(ctx, "replication").Result()
		if err != nil {
			return err.Error()
		}
		for _, line := range strings.Split(info, "\r\n") {
			if r, ok := strings.CutPrefix(line, "role:"); ok {
				return r
			}
		}
		return info
	}
	deadline := time.Now().Add(30 * time.Second)
	for role(replica) != "master" || role(old) != "slave" {
		if time.Now().After(deadline) {
			t.Fatalf("no failover after 30s: %s is %s, %s is %s", replica.Addr(), role(replica), old.Addr(), role(old))
		}
		time.Sleep(20 * time.Millisecond) // polling the servers' roles
	}
	if m, err := c.MasterForKey(ctx, "{mf:}schema"); err != nil || m.Options().Addr != old.Addr() {
		t.Fatalf("the client's slot map should still name the old master %s: %v %v", old.Addr(), m, err)
	}
	// The old master, now a replica, answers MOVED (and needs its replica
	// count: the new master has the old one as its replica).
	if err := create("b"); err != nil {
		t.Fatalf("create after the manual failover, with a stale slot map: %v", err)
	}
	if n, err := replica.Client(t).Exists(ctx, "{mf:}i:b").Result(); err != nil || n != 1 {
		t.Fatalf("b is not on the new master: %d, %v", n, err)
	}
}
