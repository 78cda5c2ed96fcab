package memqueue_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/weftworks/weft/internal/queue"
	"github.com/weftworks/weft/internal/queue/memqueue"
	"github.com/weftworks/weft/internal/queue/queuetest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	queuetest.Exercise(t, func(t *testing.T, capacity int) queue.Queue { return memqueue.New(capacity) })
}

// BenchmarkPushPop: one push and one pop, with 1,000 items queued, from
// GOMAXPROCS goroutines at once.
func BenchmarkPushPop(b *testing.B) {
	q := memqueue.New(10_000)
	ctx := context.Background()
	for i := range 1000 {
		if err := q.Push(ctx, queue.Item{InstanceID: fmt.Sprint("fill", i), Key: fmt.Sprint(i % 10)}); err != nil {
			b.Fatal(err)
		}
	}
	var n atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			i := n.Add(1)
			if err := q.Push(ctx, queue.Item{InstanceID: fmt.Sprint("i", i), Key: fmt.Sprint(i % 10)}); err != nil {
				b.Error(err)
				return
			}
			if _, err := q.Pop(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
