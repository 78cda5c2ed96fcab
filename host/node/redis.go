package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/notify"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/ratelimit/redislimit"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/redislock"
	"github.com/weftworks/weft/plugins"
	"github.com/weftworks/weft/plugins/redisblobs"
)

// openRedis opens the cluster-mode parts: with RedisAddrs, the store,
// queue and bus on the first address and the locks on all of them; with
// RedisCluster, all of them on one cluster client.
func (n *Node) openRedis(ctx context.Context) (plugins.Blobs, lock.Locker, error) {
	if n.cfg.Engine.NodeID == "" {
		// The queue's consumer name and the engine's leases must agree.
		n.cfg.Engine.NodeID = "node-" + randomHex(4)
	}
	cfg := n.cfg
	// Every idle worker holds a connection in a blocking read of the
	// ready queue: the pool gets one per worker on top of go-redis's
	// default (ten per CPU), or idle workers starve every other call,
	// and the lock calls, whose deadlines are a twentieth of a lock's
	// TTL, time out waiting for a connection for as long as they idle.
	// The schedules sweep's steppers get theirs too. A cluster client
	// keeps a pool of this size per node: the queue's keys share one
	// slot, so its master takes every blocking read.
	pool := 10*runtime.GOMAXPROCS(0) + cfg.Engine.WithDefaults().Workers + engine.ScheduleSteppers
	var (
		data        redis.UniversalClient
		lockClients []redis.UniversalClient
		// where names the Redis that data reaches, in errors.
		where string
	)
	if len(cfg.RedisCluster) > 0 {
		where = "the redis cluster at " + strings.Join(cfg.RedisCluster, ",")
		// The client sends a slot's commands to the master its slot map
		// names, and a dead master answers no MOVED: only a reload of the
		// map finds the replica promoted in its place. go-redis reloads it
		// when it is older than ClusterStateReloadInterval (a minute by
		// default) as commands flow. At a second, which costs one CLUSTER
		// SLOTS a second, a client reached the promoted replica 0.6s after
		// the failover instead of 57s (three masters with a replica each).
		cc := redis.NewClusterClient(&redis.ClusterOptions{
			Addrs: cfg.RedisCluster, ContextTimeoutEnabled: true, DialTimeout: 2 * time.Second, PoolSize: pool,
			ClusterStateReloadInterval: time.Second,
		})
		if h := cfg.redisHook; h != nil {
			// Before the first command: on the cluster client, and on
			// each node's client, which carries a WATCH's commands and
			// those of a connection of its own (the store's WAIT).
			cc.AddHook(h)
			cc.OnNewNode(func(c *redis.Client) { c.AddHook(h) })
		}
		n.closers = append(n.closers, cc.Close)
		n.pings = append(n.pings, func(ctx context.Context) error { return pingMasters(ctx, cc, where) })
		data, lockClients = cc, []redis.UniversalClient{cc}
	} else {
		where = "redis " + cfg.RedisAddrs[0]
		for _, addr := range cfg.RedisAddrs {
			c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: 2 * time.Second, PoolSize: pool})
			lockClients = append(lockClients, c)
			n.closers = append(n.closers, c.Close)
			n.pings = append(n.pings, func(ctx context.Context) error {
				if err := c.Ping(ctx).Err(); err != nil {
					return fmt.Errorf("redis %s: %w", addr, err)
				}
				return nil
			})
		}
		data = lockClients[0]
	}
	if cfg.RedisShards > 1 {
		if err := checkRedis7(ctx, data); err != nil {
			return nil, nil, fmt.Errorf("node: RedisShards is %d on %s: %w", cfg.RedisShards, where, err)
		}
	}
	sc := redisstore.Config{Client: data, Logger: n.log, WaitReplicas: cfg.RedisWaitReplicas, WaitTimeout: cfg.RedisWaitTimeout}
	if cfg.RedisPartitions > 1 {
		if err := checkRedis7(ctx, data); err != nil {
			return nil, nil, fmt.Errorf("node: RedisPartitions is %d on %s: %w", cfg.RedisPartitions, where, err)
		}
		st, err := redisstore.OpenPartitioned(ctx, redisstore.PartitionedConfig{Config: sc, Partitions: cfg.RedisPartitions})
		if err != nil {
			return nil, nil, fmt.Errorf("node: opening the store on %s: %w", where, err)
		}
		n.store = st
	} else {
		st, err := redisstore.Open(ctx, sc)
		if err != nil {
			return nil, nil, fmt.Errorf("node: opening the store on %s: %w", where, err)
		}
		n.store = st
	}
	q, err := redisqueue.New(redisqueue.Config{Client: data, Consumer: cfg.Engine.NodeID, Capacity: cfg.QueueCapacity, Shards: cfg.RedisShards, Logger: n.log})
	if err != nil {
		return nil, nil, fmt.Errorf("node: opening the ready queue on %s: %w", where, err)
	}
	n.queue = q
	// Under the store's prefix, with a hash tag per key of its own.
	if n.limiter, err = redislimit.New(redislimit.Config{Client: data, Prefix: redisstore.DefaultPrefix}); err != nil {
		return nil, nil, fmt.Errorf("node: the rate limiter on %s: %w", where, err)
	}
	bus, err := notify.NewRedis(notify.RedisConfig{Client: data, Shards: cfg.RedisShards, Sharded: engine.InstanceTopics(), Logger: n.log})
	if err != nil {
		return nil, nil, fmt.Errorf("node: opening the bus on %s: %w", where, err)
	}
	n.bus = bus
	// Closed before the clients they use (closers run in order after the
	// store).
	n.closers = append([]func() error{q.Close, bus.Close}, n.closers...)
	locks, err := redislock.New(redislock.Config{Clients: lockClients, Logger: n.log})
	if err != nil {
		locksOn := where
		if len(cfg.RedisAddrs) > 1 {
			locksOn = "redis " + strings.Join(cfg.RedisAddrs, ",") // every server holds the locks
		}
		return nil, nil, fmt.Errorf("node: the locks on %s: %w", locksOn, err)
	}
	return redisblobs.New(data, ""), locks, nil
}

// pingMasters checks that every master of the cluster answers: each holds
// a share of the slots, the store's among them or the locks'. Its error
// names the node that did not answer, or the cluster (where) when its
// slots could not be read.
func pingMasters(ctx context.Context, cc *redis.ClusterClient, where string) error {
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		if err := c.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("redis cluster master %s: %w", c.Options().Addr, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s: %w", where, err)
	}
	return nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// checkRedis7 refuses a Redis older than 7.0, on every master of a
// cluster: shards need its script flags (#!lua) and sharded pub/sub, and
// an older server would fail each push and notification while the node
// looked ready.
func checkRedis7(ctx context.Context, c redis.UniversalClient) error {
	check := func(ctx context.Context, c *redis.Client) error {
		info, err := c.Info(ctx, "server").Result()
		if err != nil {
			return fmt.Errorf("reading the version of redis %s: %w", c.Options().Addr, err)
		}
		if v := infoField(info, "redis_version"); !atLeast7(v) {
			return fmt.Errorf("redis %s is version %q: shards need Redis 7.0 or newer", c.Options().Addr, v)
		}
		return nil
	}
	switch c := c.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, check)
	case *redis.Client:
		return check(ctx, c)
	}
	return fmt.Errorf("a %T: shards need a *redis.Client or a *redis.ClusterClient", c)
}

// atLeast7 reports whether a Redis version ("7.0.15") is 7.0 or newer.
func atLeast7(v string) bool {
	major, _, _ := strings.Cut(v, ".")
	n, err := strconv.Atoi(major)
	return err == nil && n >= 7
}

// infoField returns the value of a field of an INFO answer, "" when it
// has none.
func infoField(info, name string) string {
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+":"); ok {
			return v
		}
	}
	return ""
}
