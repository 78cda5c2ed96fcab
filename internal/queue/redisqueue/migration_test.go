package redisqueue_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// Items queued by the version before the fair order (entries in the stream
// that no consumer has read) are delivered after an upgrade, before the
// items queued since, with their coalescing intact; an old node that
// pushes during a rolling upgrade is heard by a waiting Pop.
func TestOldVersionEntriesAreDelivered(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// before is what the old version did before it queued a1 and a2.
		before func(t *testing.T, s *redistest.Server, p string)
	}{
		{"the stream never read", func(*testing.T, *redistest.Server, string) {}},
		{"the stream read before", func(t *testing.T, s *redistest.Server, p string) {
			// An old node popped and acked z: the group exists and has
			// delivered an entry.
			c := s.Client(t)
			ctx := timeout(t, 5*time.Second)
			id := legacyPush(t, c, p, "z", "start")
			if err := c.XGroupCreateMkStream(ctx, "{"+p+"}:ready", "workers", "0").Err(); err != nil {
				t.Fatal(err)
			}
			if err := c.XReadGroup(ctx, &redis.XReadGroupArgs{Group: "workers", Consumer: "old", Streams: []string{"{" + p + "}:ready", ">"}, Count: 1, Block: -1}).Err(); err != nil {
				t.Fatal(err)
			}
			for _, err := range []error{
				c.HDel(ctx, "{"+p+"}:queued", "z").Err(),
				c.XAck(ctx, "{"+p+"}:ready", "workers", id).Err(),
				c.XDel(ctx, "{"+p+"}:ready", id).Err(),
			} {
				if err != nil {
					t.Fatal(err)
				}
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := redistest.Start(t)
			p := prefix(t)
			c := s.Client(t)
			ctx := timeout(t, 30*time.Second)
			tt.before(t, s, p)
			legacyPush(t, c, p, "a1", "start")
			legacyPush(t, c, p, "a2", "timer")

			q := newQueue(t, s, redisqueue.Config{Consumer: "new", Prefix: p})
			b := queue.Item{InstanceID: "b", Reason: "start", Priority: 1, Key: "k"}
			push(t, q, b)
			push(t, q, queue.Item{InstanceID: "a1", Reason: "resume", Priority: 1}) // coalesces into the old entry
			if n, err := q.Depth(ctx); err != nil || n != 3 {
				t.Fatalf("Depth = %d, %v; want 3", n, err)
			}
			for _, want := range []queue.Item{{InstanceID: "a1", Reason: "start"}, {InstanceID: "a2", Reason: "timer"}, b} {
				d, err := q.Pop(ctx)
				if err != nil || d.Item() != want {
					t.Fatalf("Pop: %v, %v; want %+v", d, err, want)
				}
				if err := d.Ack(ctx); err != nil {
					t.Fatal(err)
				}
			}
			if n, err := q.Depth(ctx); err != nil || n != 0 {
				t.Fatalf("Depth after the pops = %d, %v; want 0", n, err)
			}

			// An old node pushes a3 while a Pop waits: no wake token
			// announces it, and the Pop's periodic look finds it.
			got := make(chan queue.Item, 1)
			go func() {
				d, err := q.Pop(ctx)
				if err != nil {
					got <- queue.Item{Reason: err.Error()}
					return
				}
				_ = d.Ack(ctx)
				got <- d.Item()
			}()
			legacyPush(t, c, p, "a3", "start")
			select {
			case it := <-got:
				if want := (queue.Item{InstanceID: "a3", Reason: "start"}); it != want {
					t.Fatalf("waiting Pop got %+v, want %+v", it, want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a waiting Pop did not find an old node's push")
			}
			if n, err := c.XLen(ctx, "{"+p+"}:ready").Result(); err != nil || n != 0 {
				t.Fatalf("stream length at the end = %d, %v; want 0", n, err)
			}
			if n, err := c.Exists(ctx, "{"+p+"}:queued").Result(); err != nil || n != 0 {
				t.Fatalf("queued hash exists at the end: %d, %v", n, err)
			}
		})
	}
}
