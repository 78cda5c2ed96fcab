package redislimit_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/ratelimit/redislimit"
	"github.com/weftworks/weft/internal/redistest"
)

// BenchmarkReserve is the cost of a reservation on a real redis-server:
// from one caller (ns/op is a call's latency, one round trip), and from 32
// parallel callers per core on one key and on a key per caller (ns/op is
// the inverse of the throughput, one script per call).
func BenchmarkReserve(b *testing.B) {
	s := redistest.Start(b)
	l, err := redislimit.New(redislimit.Config{Client: s.Client(b)})
	if err != nil {
		b.Fatal(err)
	}
	lim := ratelimit.Limit{Count: 1_000_000, Per: time.Second, Burst: 100}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := l.Reserve(context.Background(), "serial", lim, time.Second); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, keys := range []string{"one", "many"} {
		b.Run("keys="+keys, func(b *testing.B) {
			var next atomic.Int64
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := keys
				if keys == "many" {
					key = "k" + strconv.FormatInt(next.Add(1), 10)
				}
				for pb.Next() {
					if _, _, err := l.Reserve(context.Background(), key, lim, time.Second); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}
