package notify_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/notify"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
)

// clusterShards is the number of shards of the buses on a Redis Cluster:
// more than the masters, so that each master serves several.
const clusterShards = 8

// On a real Redis Cluster of three masters with a replica each: the
// suite, every shard reaching every bus, and the shards' subscriptions
// following their slots through a resharding, a master's failover (its
// kill) and a manual failover.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartClusterOf(t, 3, 1)
	newBus := func(t *testing.T, prefix string) *notify.Redis {
		// Each bus has its own cluster client: two nodes.
		r, err := notify.NewRedis(notify.RedisConfig{
			Client: c.Client(t), Prefix: prefix, Shards: clusterShards, Sharded: shardedTopics, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	t.Run("suite", func(t *testing.T) {
		exercise(t, func(t *testing.T) bus { return newBus(t, t.Name()+":") },
			func(p string) int { return partition.Of(p, clusterShards) })
	})

	const prefix = "weft:notify:"
	tags, err := partition.Tags(prefix, clusterShards)
	if err != nil {
		t.Fatal(err)
	}
	a, b := newBus(t, prefix), newBus(t, prefix)
	ctx := timeout(t, 5*time.Minute)
	// cancel and t are sharded (as the engine's inbox and changed are),
	// definitions is classic (as the plugin announcements are).
	topics := []string{"cancel", "t", "definitions"}
	inboxes := map[*notify.Redis]map[string]*inbox{}
	for _, bus := range []*notify.Redis{a, b} {
		inboxes[bus] = map[string]*inbox{}
		for _, topic := range topics {
			in := newInbox()
			if _, err := bus.Subscribe(ctx, topic, in.fn); err != nil {
				t.Fatal(err)
			}
			inboxes[bus][topic] = in
		}
		if n := bus.Receivers(); n != 1+clusterShards {
			t.Fatalf("%d receiving connections, want %d: the classic one and one per shard", n, 1+clusterShards)
		}
	}
	receivers := func(topic string) []*inbox { return []*inbox{inboxes[a][topic], inboxes[b][topic]} }

	t.Run("the shards spread over the masters", func(t *testing.T) {
		masters := map[string]bool{}
		for _, tag := range tags {
			masters[c.MasterOf(t, tag+":cancel").Addr()] = true
		}
		if want := len(c.Masters(t)); len(masters) != want {
			t.Fatalf("the %d shards are served by %d masters, want %d", clusterShards, len(masters), want)
		}
	})
	t.Run("every bus receives every shard and the catalog-wide topics", func(t *testing.T) {
		publishUntilReceived(t, a, "cancel", idsOfShards(clusterShards, "from-a"), 10*time.Second, receivers("cancel")...)
		publishUntilReceived(t, b, "t", idsOfShards(clusterShards, "from-b"), 10*time.Second, receivers("t")...)
		publishUntilReceived(t, a, "definitions", []string{"catalog"}, 10*time.Second, receivers("definitions")...)
	})
	// A resharding moves a shard's slot to another master, which the
	// old one is no replica of: Redis ends the subscriptions there and
	// refuses them again (MOVED), and the buses follow the slot.
	t.Run("a resharding", func(t *testing.T) {
		const q = 6
		channel := tags[q] + ":cancel"
		slot := partition.Slot(channel)
		from := c.MasterOf(t, channel)
		var to *redistest.Server
		for _, m := range c.Masters(t) {
			if m != from {
				to = m
				break
			}
		}
		admin := func(s *redistest.Server) *redis.Client {
			cl := redis.NewClient(s.Options())
			t.Cleanup(func() { _ = cl.Close() })
			return cl
		}
		src, dst := admin(from), admin(to)
		srcID, err := src.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		dstID, err := dst.Do(ctx, "CLUSTER", "MYID").Text()
		if err != nil {
			t.Fatal(err)
		}
		// A channel is no key: there is nothing to MIGRATE.
		for _, step := range []struct {
			on   *redis.Client
			args []any
		}{
			{dst, []any{"CLUSTER", "SETSLOT", slot, "IMPORTING", srcID}},
			{src, []any{"CLUSTER", "SETSLOT", slot, "MIGRATING", dstID}},
			{dst, []any{"CLUSTER", "SETSLOT", slot, "NODE", dstID}},
			{src, []any{"CLUSTER", "SETSLOT", slot, "NODE", dstID}},
		} {
			if err := step.on.Do(ctx, step.args...).Err(); err != nil {
				t.Fatalf("%v: %v", step.args, err)
			}
		}
		c.WaitHealthy(t)
		if m := c.MasterOf(t, channel); m != to {
			t.Fatalf("slot %d is served by %s after the resharding, want %s", slot, m.Addr(), to.Addr())
		}
		movedAt := time.Now()
		publishUntilReceived(t, a, "cancel", idsOfShards(clusterShards, "resharded")[q:q+1], 20*time.Second, receivers("cancel")...)
		t.Logf("shard %d's notifications received again on both buses %s after the cluster healed (master %s, then %s)",
			q, time.Since(movedAt).Round(time.Millisecond), from.Addr(), to.Addr())
	})
	t.Run("a master's failover", func(t *testing.T) {
		const q = 3
		channel := tags[q] + ":cancel"
		killed := c.KillMasterOf(t, channel)
		killedAt := time.Now()
		promoted := c.WaitFailover(t, channel)
		promotedAt := time.Now()
		if promoted == killed {
			t.Fatalf("the killed master %s still serves shard %d", killed.Addr(), q)
		}
		// Notifications published during the failover may be lost; those
		// published after it arrive again within a bound.
		publishUntilReceived(t, a, "cancel", idsOfShards(clusterShards, "failover")[q:q+1], 20*time.Second, receivers("cancel")...)
		t.Logf("shard %d's notifications received again on both buses %s after the kill, %s after the promotion (master %s, then %s)",
			q, time.Since(killedAt).Round(time.Millisecond), time.Since(promotedAt).Round(time.Millisecond), killed.Addr(), promoted.Addr())
		// Every shard and the classic topics work on both buses.
		publishUntilReceived(t, b, "cancel", idsOfShards(clusterShards, "after-failover"), 20*time.Second, receivers("cancel")...)
		publishUntilReceived(t, a, "definitions", []string{"catalog-after-failover"}, 20*time.Second, receivers("definitions")...)
	})
	// A manual failover demotes a live master: the connections stay up,
	// and Redis ends the subscriptions to the shards of the slots it no
	// longer serves (sunsubscribe), which the buses make again.
	t.Run("a manual failover", func(t *testing.T) {
		q, old := -1, (*redistest.Server)(nil)
		for i, tag := range tags {
			if m := c.MasterOf(t, tag+":cancel"); len(c.ReplicasOf(t, m)) > 0 {
				q, old = i, m
				break
			}
		}
		if q < 0 {
			t.Fatal("no shard's master has a replica left")
		}
		channel := tags[q] + ":cancel"
		replica := c.ReplicasOf(t, old)[0]
		admin := redis.NewClient(replica.Options())
		t.Cleanup(func() { _ = admin.Close() })
		if err := admin.ClusterFailover(ctx).Err(); err != nil {
			t.Fatalf("CLUSTER FAILOVER on %s: %v", replica.Addr(), err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for c.MasterOf(t, channel) == old {
			if time.Now().After(deadline) {
				t.Fatalf("%s still serves shard %d 30s after CLUSTER FAILOVER", old.Addr(), q)
			}
			poll := time.NewTimer(50 * time.Millisecond)
			<-poll.C
		}
		c.WaitHealthy(t)
		promotedAt := time.Now()
		publishUntilReceived(t, a, "cancel", idsOfShards(clusterShards, "manual")[q:q+1], 20*time.Second, receivers("cancel")...)
		t.Logf("shard %d's notifications received again on both buses %s after the cluster healed (master %s, then %s)",
			q, time.Since(promotedAt).Round(time.Millisecond), old.Addr(), c.MasterOf(t, channel).Addr())
		publishUntilReceived(t, b, "cancel", idsOfShards(clusterShards, "after-manual"), 20*time.Second, receivers("cancel")...)
	})
}

// A shard's master that stops answering (paused, as a stalled host) makes
// the receivers of its shards replace their silent connections, and the
// new connection's dial waits for the master until it times out, again
// and again. Meanwhile the notifications of the other shards go on being
// dispatched, each within much less than such a dial: no receiver dials
// while it holds what the others and the dispatcher need.
func TestRedisClusterPausedMasterHoldsUpNoOtherShard(t *testing.T) {
	t.Parallel()
	const (
		// healthEvery and callTimeout of redis.go: a silent connection is
		// replaced after two health intervals, and a dial waits up to a
		// call's timeout.
		healthEvery = time.Second
		callTimeout = 5 * time.Second
		// bound is how long a healthy shard's notification may take,
		// well under a dial that waits for the paused master.
		bound = 2 * time.Second
	)
	// No failover within the test: the paused master keeps its slots, and
	// the cluster stays ok for the others.
	c := redistest.StartClusterOf(t, 3, 0, redistest.WithClusterNodeTimeout(5*time.Minute))
	const prefix = "weft:notify:"
	newBus := func() *notify.Redis {
		r, err := notify.NewRedis(notify.RedisConfig{
			Client: c.Client(t), Prefix: prefix, Shards: clusterShards, Sharded: []string{"cancel"}, Logger: testLogger(t),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = r.Close() })
		return r
	}
	sub, pub := newBus(), newBus()
	ctx := timeout(t, 2*time.Minute)
	in := newInbox()
	if _, err := sub.Subscribe(ctx, "cancel", in.fn); err != nil {
		t.Fatal(err)
	}
	publishUntilReceived(t, pub, "cancel", idsOfShards(clusterShards, "before"), 10*time.Second, in)

	tags, err := partition.Tags(prefix, clusterShards)
	if err != nil {
		t.Fatal(err)
	}
	paused := c.MasterOf(t, tags[0]+":cancel")
	var healthy []int // the shards another master serves
	for q, tag := range tags {
		if c.MasterOf(t, tag+":cancel") != paused {
			healthy = append(healthy, q)
		}
	}
	if len(healthy) == 0 || len(healthy) == clusterShards {
		t.Fatalf("%d of %d shards on other masters than %s, want some", len(healthy), clusterShards, paused.Addr())
	}
	paused.Pause(t)
	t.Cleanup(func() { paused.Resume(t) }) // before the buses close: a dial in progress ends sooner
	pausedAt := time.Now()

	// Past the replacement of the paused shards' connections and one
	// dial's timeout, one healthy shard's notification after another.
	var worst time.Duration
	n := 0
	for time.Since(pausedAt) < 2*healthEvery+2*callTimeout {
		q := healthy[n%len(healthy)]
		p := idsOfShards(clusterShards, fmt.Sprint("paused-", n))[q]
		n++
		base := len(in.snapshot())
		sent := time.Now()
		if err := pub.Publish(ctx, "cancel", []byte(p)); err != nil {
			t.Fatalf("publishing to shard %d, served by a live master: %v", q, err)
		}
		for !slices.Contains(in.snapshot()[base:], p) {
			if wait := time.Since(sent); wait > bound {
				t.Fatalf("shard %d's notification not received %s after it was published, %s after %s was paused", q, wait.Round(time.Millisecond), time.Since(pausedAt).Round(time.Millisecond), paused.Addr())
			}
			tick := time.NewTimer(10 * time.Millisecond)
			select {
			case <-in.more:
			case <-tick.C:
			}
			tick.Stop()
		}
		worst = max(worst, time.Since(sent))
		pace := time.NewTimer(20 * time.Millisecond)
		<-pace.C
	}
	t.Logf("%d notifications of the %d healthy shards while %s was paused, each received within %s", n, len(healthy), paused.Addr(), worst.Round(time.Millisecond))
}
