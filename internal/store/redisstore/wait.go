package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// Durability across failover (Config.WaitReplicas).
//
// Redis replicates asynchronously: a master that dies before its replicas
// received a write loses it when a replica is promoted. With WaitReplicas
// set, every write script is followed, on the same connection, by an INCR
// of P sync and WAIT: the answer is returned only once that many replicas
// have everything the master had after the script, and a WAIT that times
// out turns the answer into an error matching store.ErrNotDurable (and
// weft.ErrUnavailable). The INCR is what makes a refusal durable too: a
// script that refuses writes nothing, so WAIT alone would not cover the
// write it refused against (another node's create, say), which the caller
// is about to act on; the INCR comes after the script in the replication
// stream, so a replica that has it has that write too.
//
// A write whose WAIT timed out was applied on the master and may be lost
// or kept: the caller treats it as failed and retries, which the store's
// compare-and-sets make safe (doc.go's "Client and Close"). Reads are not
// waited for: a read may see a write that a failover then loses, as on
// any Redis; what the store promises is that nothing it acknowledged as
// written, or refused because of, is lost in a failover to a replica that
// WAIT counted.

// write runs a write script with the schema key as KEYS[1] (as run does)
// on a context that outlives the caller's (writeCtx), and, with
// WaitReplicas set, waits for the replicas. The waited path sends its
// commands to the master that the cluster client's slot map names, not
// through the client, so it follows no MOVED itself: when the script is
// redirected (a failover, a manual one, a resharding moved the store's
// slot: the script did not run), it reads the slot map again and tries
// once more.
func (s *Store) write(ctx context.Context, sc *redis.Script, a args) *redis.Cmd {
	ctx = writeCtx(ctx)
	if s.cfg.WaitReplicas == 0 {
		return s.run(ctx, sc, a)
	}
	cmd, redirected := s.writeWaited(ctx, sc, a)
	if redirected && s.followMoved(ctx, cmd.Err()) == nil {
		cmd, _ = s.writeWaited(ctx, sc, a)
	}
	return cmd
}

// writeWaited is write's waited path, once: the script and an INCR of P
// sync on one connection to the store's master, then WAIT on it. It
// reports whether the script was redirected to another node.
func (s *Store) writeWaited(ctx context.Context, sc *redis.Script, a args) (_ *redis.Cmd, redirected bool) {
	key := s.p + "schema"
	cmd := redis.NewCmd(ctx)
	conn, err := s.connFor(ctx, key)
	if err != nil {
		cmd.SetErr(err)
		return cmd, false
	}
	defer conn.Close() // back to the pool
	keys := []string{key}
	var sync *redis.IntCmd
	for range 2 { // the second time after loading the script
		var script *redis.Cmd
		_, err = conn.Pipelined(ctx, func(p redis.Pipeliner) error {
			script = sc.EvalSha(ctx, p, keys, a...)
			sync = p.Incr(ctx, s.p+"sync")
			return nil
		})
		if err := script.Err(); err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			cmd = script
			break
		}
		if err := sc.Load(ctx, conn).Err(); err != nil {
			cmd.SetErr(err)
			return cmd, moved(err)
		}
	}
	if err == nil {
		err = sync.Err()
	}
	if err != nil {
		if cmd.Err() == nil {
			cmd.SetErr(err)
		}
		s.lostRoute(ctx, err)
		return cmd, moved(cmd.Err())
	}
	if err := s.waitOn(ctx, conn); err != nil {
		cmd.SetErr(err)
	}
	return cmd, false
}

// moved reports a command that a cluster node sent elsewhere: the slot is
// served by another node (MOVED), or is being moved to it (ASK).
func moved(err error) bool {
	return redis.HasErrorPrefix(err, "MOVED") || redis.HasErrorPrefix(err, "ASK")
}

// followMoved reads a cluster client's slot map again until it names the
// node that a MOVED answer (err) named, for at most movedPatience: right
// after a failover, the node the client asks for the map may not know of
// it yet. ASK (a slot being migrated) is not followed: the write fails as
// unavailable, and is retried by its caller.
func (s *Store) followMoved(ctx context.Context, err error) error {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return errors.New("redisstore: not a cluster client")
	}
	var to string
	if f := strings.Fields(err.Error()); len(f) == 3 && f[0] == "MOVED" {
		to = f[2]
	} else {
		return fmt.Errorf("redisstore: not a MOVED answer: %w", err)
	}
	key := s.p + "schema"
	deadline := time.Now().Add(movedPatience)
	for {
		// ForEachMaster reads the map at once; ReloadState only asks for it.
		if err := cc.ForEachMaster(ctx, func(context.Context, *redis.Client) error { return nil }); err == nil {
			if m, err := cc.MasterForKey(ctx, key); err == nil && m.Options().Addr == to {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redisstore: the cluster's slot map did not name %s within %s", to, movedPatience)
		}
		t := time.NewTimer(20 * time.Millisecond) // the cluster's nodes learn of the failover by gossip
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		}
	}
}

// movedPatience bounds how long a redirected write waits for the cluster's
// slot map to name the node that redirected it.
const movedPatience = 2 * time.Second

// waiter is a connection of its own: *redis.Conn, or the *redis.Tx of a
// WATCH.
type waiter interface {
	Wait(ctx context.Context, numSlaves int, timeout time.Duration) *redis.IntCmd
}

// waitOn waits until WaitReplicas replicas have what the master had after
// the last write of conn, or WaitTimeout passed (a *notDurableError).
func (s *Store) waitOn(ctx context.Context, conn waiter) error {
	n, err := conn.Wait(ctx, s.cfg.WaitReplicas, s.cfg.WaitTimeout).Result()
	if err != nil {
		s.lostRoute(ctx, err)
		return err
	}
	if int(n) < s.cfg.WaitReplicas {
		return &notDurableError{replicas: int(n), want: s.cfg.WaitReplicas, timeout: s.cfg.WaitTimeout}
	}
	return nil
}

// BarrierOf is Barrier: the store's one master holds every instance, id
// among them. (A partitioned store waits on the instance's partition.)
func (s *Store) BarrierOf(ctx context.Context, _ string) error { return s.Barrier(ctx) }

// Barrier returns once WaitReplicas replicas have everything the master
// held when it was called (an INCR of P sync and WAIT), at once when
// WaitReplicas is 0; a shortfall is an error matching
// store.ErrNotDurable. The engine calls it before it answers from a read
// what a write of its own would have answered (a retried start finding
// the instance its first attempt created).
func (s *Store) Barrier(ctx context.Context) error {
	if s.cfg.WaitReplicas == 0 {
		return nil
	}
	if err := s.begin(ctx); err != nil {
		return err
	}
	ctx = writeCtx(ctx)
	err := s.barrier(ctx)
	if moved(err) && s.followMoved(ctx, err) == nil {
		err = s.barrier(ctx) // the slot moved (write)
	}
	if err != nil {
		return s.fail(ctx, "barrier of store", s.cfg.Prefix, err)
	}
	return nil
}

// barrier is Barrier, once.
func (s *Store) barrier(ctx context.Context) error {
	key := s.p + "sync"
	conn, err := s.connFor(ctx, key)
	if err != nil {
		return err
	}
	defer conn.Close() // back to the pool
	if err := conn.Incr(ctx, key).Err(); err != nil {
		s.lostRoute(ctx, err)
		return err
	}
	return s.waitOn(ctx, conn)
}

// connFor returns a connection of its own (Close gives it back to the
// pool) to the master that serves key: WAIT counts the replicas that have
// the writes of the connection it is sent on.
func (s *Store) connFor(ctx context.Context, key string) (*redis.Conn, error) {
	switch c := s.c.(type) {
	case *redis.Client:
		return c.Conn(), nil
	case *redis.ClusterClient:
		m, err := c.MasterForKey(ctx, key)
		if err != nil {
			return nil, err
		}
		return m.Conn(), nil
	}
	// Config.validate refuses WaitReplicas with any other client.
	return nil, fmt.Errorf("redisstore: WaitReplicas needs a *redis.Client or a *redis.ClusterClient, not a %T", s.c)
}

// lostRoute asks a cluster client to read the cluster's slots again when
// a waited write, sent to the master it named, failed: a failover may
// have moved the store's slot, and the waited path does not follow MOVED
// as the client's own commands do.
func (s *Store) lostRoute(ctx context.Context, err error) {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok || !unavailable(err) {
		return
	}
	cc.ReloadState(ctx)
}

// notDurableError is a write that fewer replicas than WaitReplicas
// confirmed within WaitTimeout.
type notDurableError struct {
	replicas, want int
	timeout        time.Duration
}

// Error names the shortfall.
func (e *notDurableError) Error() string {
	return fmt.Sprintf("%d of %d replicas confirmed the write within %s", e.replicas, e.want, e.timeout)
}

// Is matches store.ErrNotDurable and weft.ErrUnavailable: the API answers
// 503, and a caller retries.
func (e *notDurableError) Is(target error) bool {
	return target == store.ErrNotDurable || target == weft.ErrUnavailable
}
