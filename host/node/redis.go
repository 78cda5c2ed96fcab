package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"runtime"
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

// openRedis opens the cluster-mode parts: the store, queue and bus on the
// first address, the locks on all of them.
func (n *Node) openRedis(ctx context.Context) (plugins.Blobs, lock.Locker, error) {
	if n.cfg.Engine.NodeID == "" {
		// The queue's consumer name and the engine's leases must agree.
		n.cfg.Engine.NodeID = "node-" + randomHex(4)
	}
	cfg := n.cfg
	clients := make([]redis.UniversalClient, 0, len(cfg.RedisAddrs))
	// Every idle worker holds a connection in a blocking read of the
	// ready queue: the pool gets one per worker on top of go-redis's
	// default (ten per CPU), or idle workers starve every other call,
	// and the lock calls, whose deadlines are a twentieth of a lock's
	// TTL, time out waiting for a connection for as long as they idle.
	// The schedules sweep's steppers get theirs too.
	pool := 10*runtime.GOMAXPROCS(0) + cfg.Engine.WithDefaults().Workers + engine.ScheduleSteppers
	for _, addr := range cfg.RedisAddrs {
		c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, DialTimeout: 2 * time.Second, PoolSize: pool})
		clients = append(clients, c)
		n.closers = append(n.closers, c.Close)
		n.pings = append(n.pings, func(ctx context.Context) error {
			if err := c.Ping(ctx).Err(); err != nil {
				return fmt.Errorf("redis %s: %w", addr, err)
			}
			return nil
		})
	}
	data := clients[0]
	st, err := redisstore.Open(ctx, redisstore.Config{Client: data, Logger: n.log})
	if err != nil {
		return nil, nil, fmt.Errorf("node: opening the redis store at %s: %w", cfg.RedisAddrs[0], err)
	}
	n.store = st
	q, err := redisqueue.New(redisqueue.Config{Client: data, Consumer: cfg.Engine.NodeID, Capacity: cfg.QueueCapacity, Logger: n.log})
	if err != nil {
		return nil, nil, fmt.Errorf("node: opening the redis queue at %s: %w", cfg.RedisAddrs[0], err)
	}
	n.queue = q
	// Under the store's prefix, with a hash tag per key of its own.
	if n.limiter, err = redislimit.New(redislimit.Config{Client: data, Prefix: redisstore.DefaultPrefix}); err != nil {
		return nil, nil, fmt.Errorf("node: the rate limiter on redis %s: %w", cfg.RedisAddrs[0], err)
	}
	bus, err := notify.NewRedis(notify.RedisConfig{Client: data, Logger: n.log})
	if err != nil {
		return nil, nil, fmt.Errorf("node: opening the redis bus at %s: %w", cfg.RedisAddrs[0], err)
	}
	n.bus = bus
	// Closed before the clients they use (closers run in order after the
	// store).
	n.closers = append([]func() error{q.Close, bus.Close}, n.closers...)
	locks, err := redislock.New(redislock.Config{Clients: clients, Logger: n.log})
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	return redisblobs.New(data, ""), locks, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
