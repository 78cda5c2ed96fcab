package redislock_test

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/lock"
	"github.com/weftworks/weft/lock/redislock"
)

// BenchmarkAcquireContended measures how long Acquire takes when
// contenders goroutines, spread over two Lockers (two nodes), take turns on
// one key: each acquires, releases, and goes again. It reports the p50 and
// p99 of the Acquire latency; ns/op is the time per acquisition of the
// whole group.
func BenchmarkAcquireContended(b *testing.B) {
	for _, servers := range []int{1, 3} {
		for _, contenders := range []int{1, 2, 8} {
			b.Run(fmt.Sprintf("servers=%d/contenders=%d", servers, contenders), func(b *testing.B) {
				nodes := make([]lock.Locker, 2)
				ss := make([]*redistest.Server, servers)
				for i := range ss {
					ss[i] = redistest.Start(b)
				}
				for i := range nodes {
					cs := make([]redis.UniversalClient, servers)
					for j, s := range ss {
						cs[j] = s.Client(b)
					}
					l, err := redislock.New(redislock.Config{Clients: cs, Logger: discard()})
					if err != nil {
						b.Fatal(err)
					}
					nodes[i] = l
				}
				var (
					left = atomic.Int64{}
					mu   sync.Mutex
					lat  = make([]time.Duration, 0, b.N)
					wg   sync.WaitGroup
				)
				left.Store(int64(b.N))
				b.ResetTimer()
				for g := range contenders {
					l := nodes[g%len(nodes)]
					wg.Go(func() {
						mine := make([]time.Duration, 0, b.N/contenders+1)
						for left.Add(-1) >= 0 {
							start := time.Now()
							ls, err := l.Acquire(b.Context(), "bench", 10*time.Second)
							if err != nil {
								b.Error(err)
								return
							}
							mine = append(mine, time.Since(start))
							ls.Release(b.Context())
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					})
				}
				wg.Wait()
				b.StopTimer()
				if len(lat) == 0 {
					return
				}
				slices.Sort(lat)
				pct := func(p float64) float64 {
					return float64(lat[min(int(p*float64(len(lat))), len(lat)-1)]) / float64(time.Millisecond)
				}
				b.ReportMetric(pct(0.50), "p50-ms")
				b.ReportMetric(pct(0.99), "p99-ms")
			})
		}
	}
}
