package redisqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/redisqueue"
	"github.com/weftworks/weft/internal/redistest"
)

// meter counts what a benchmark costs Redis: the round trips of its
// client (a hook), and the commands the server ran, those inside scripts
// included (INFO commandstats).
type meter struct {
	trips atomic.Int64
	admin *redis.Client
	cmds  int64
}

func (m *meter) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) { return next(ctx, network, addr) }
}

func (m *meter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		m.trips.Add(1)
		return next(ctx, cmd)
	}
}

func (m *meter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		m.trips.Add(1)
		return next(ctx, cmds)
	}
}

// commands returns the number of commands the server has run.
func (m *meter) commands(b *testing.B) int64 {
	info, err := m.admin.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var n int64
	for line := range strings.Lines(info) {
		_, stats, ok := strings.Cut(line, ":calls=")
		if !ok {
			continue
		}
		calls, _, _ := strings.Cut(stats, ",")
		c, err := strconv.ParseInt(calls, 10, 64)
		if err != nil {
			b.Fatalf("commandstats line %q: %v", line, err)
		}
		n += c
	}
	return n
}

// start begins counting; report reports the counts per item.
func (m *meter) start(b *testing.B) {
	m.trips.Store(0)
	m.cmds = m.commands(b)
}

func (m *meter) report(b *testing.B, items int) {
	cmds := m.commands(b) - m.cmds - 1 // this INFO
	b.ReportMetric(float64(m.trips.Load())/float64(items), "roundtrips/item")
	b.ReportMetric(float64(cmds)/float64(items), "cmds/item")
	b.ReportMetric(float64(items)/b.Elapsed().Seconds(), "items/s")
}

// benchQueue returns a queue of the given number of shards on its own
// server, with a metered client.
func benchQueue(b *testing.B, shards int) (*redisqueue.Queue, *meter) {
	s := redistest.Start(b)
	m := &meter{admin: s.Client(b)}
	c := s.Client(b)
	c.AddHook(m)
	q, err := redisqueue.New(redisqueue.Config{Client: c, Consumer: "bench", Prefix: "bench", Shards: shards, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = q.Close() })
	return q, m
}

// BenchmarkPushPopAck pushes, pops and acks one item at a time: the cost
// of an item on an idle queue, where the Pop finds it waiting (with
// several shards, after a pop script per empty shard it looks at first).
func BenchmarkPushPopAck(b *testing.B) {
	for _, shards := range []int{1, 4} { // on one server: the shards' cost, not their gain
		b.Run(fmt.Sprint("shards=", shards), func(b *testing.B) {
			q, m := benchQueue(b, shards)
			ctx := context.Background()
			m.start(b)
			i := 0
			for b.Loop() {
				if err := q.Push(ctx, queue.Item{InstanceID: fmt.Sprint("i", i), Reason: "start"}); err != nil {
					b.Fatal(err)
				}
				i++
				d, err := q.Pop(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := d.Ack(ctx); err != nil {
					b.Fatal(err)
				}
			}
			m.report(b, i)
		})
	}
}

// BenchmarkPushPopAckParallel runs producers and consumers at once, as a
// node's workers do: some Pops wait, and are woken.
func BenchmarkPushPopAckParallel(b *testing.B) {
	for _, shards := range []int{1, 4} { // on one server: the shards' cost, not their gain
		b.Run(fmt.Sprint("shards=", shards), func(b *testing.B) {
			q, m := benchQueue(b, shards)
			ctx := context.Background()
			var mu sync.Mutex
			n := 0
			m.start(b)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					mu.Lock()
					n++
					id := fmt.Sprint("i", n)
					mu.Unlock()
					if err := q.Push(ctx, queue.Item{InstanceID: id, Reason: "start"}); err != nil {
						b.Error(err)
						return
					}
					d, err := q.Pop(ctx)
					if err != nil {
						b.Error(err)
						return
					}
					if err := d.Ack(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
			m.report(b, n)
		})
	}
}
