package embedded_test

import (
	"context"
	"flag"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/slots"
	"github.com/weftworks/weft/internal/store/embedded"
	"github.com/weftworks/weft/internal/store/storetest"
)

func benchStore(b *testing.B, cfg embedded.Config) *embedded.Store {
	s, err := embedded.Open(storePath(b.TempDir(), cfg.Engine), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkCommitParallel: 50 goroutines creating instances, every create
// durable (fsync) when Commit returns; the default configuration, on each
// engine.
func BenchmarkCommitParallel(b *testing.B) {
	for _, e := range engines {
		b.Run("engine="+string(e), func(b *testing.B) {
			storetest.BenchCommits(b, benchStore(b, embedded.Config{Engine: e}), 50)
		})
	}
}

// BenchmarkCommitWriters shows what group commit does for 1 to 200
// concurrent writers, on each engine: a lone writer pays one commit, many
// share one.
func BenchmarkCommitWriters(b *testing.B) {
	for _, e := range engines {
		b.Run("engine="+string(e), func(b *testing.B) {
			for _, writers := range []int{1, 10, 50, 200} {
				b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
					storetest.BenchCommits(b, benchStore(b, embedded.Config{Engine: e}), writers)
				})
			}
		})
	}
}

// BenchmarkUpdateSlots: on a key of limit 1 whose line holds 100 or
// 10,000 waiters, the holder releases its slot (the first waiter is
// promoted) and acquires it again (it joins the end of the line): two
// durable writes an iteration, whose cost does not grow with the line, as
// an operation reads the holders, the front of the line and its caller's
// own place only.
func BenchmarkUpdateSlots(b *testing.B) {
	for _, waiting := range []int{100, 10_000} {
		b.Run(fmt.Sprintf("waiting=%d", waiting), func(b *testing.B) {
			s := benchStore(b, embedded.Config{})
			ctx := context.Background()
			p := slots.Params{Limit: 1, Policy: slots.Queue, Lease: time.Hour}
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			if _, err := s.UpdateSlots(ctx, "bench", "holder", p, now, slots.Acquire); err != nil {
				b.Fatal(err)
			}
			// The line is built by concurrent callers, whose writes share
			// commits.
			var next atomic.Int64
			var wg sync.WaitGroup
			for range 100 {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(waiting); i = next.Add(1) {
						if _, err := s.UpdateSlots(ctx, "bench", fmt.Sprintf("w%05d", i), p, now, slots.Acquire); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			holder := "holder"
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				now = now.Add(time.Millisecond)
				d, err := s.UpdateSlots(ctx, "bench", holder, p, now, slots.Release)
				if err != nil || d.Outcome != slots.Released || len(d.Promoted) != 1 {
					b.Fatalf("Release %s: %+v, %v", holder, d, err)
				}
				if d, err := s.UpdateSlots(ctx, "bench", holder, p, now, slots.Acquire); err != nil || d.Outcome != slots.Waiting {
					b.Fatalf("Acquire %s: %+v, %v", holder, d, err)
				}
				holder = d.Promoted[0].ID
			}
		})
	}
}

// searchInstances is how many instances BenchmarkSearch fills the store
// with: `go test -run '^$' -bench Search ./internal/store/embedded
// -search-instances 1000000` measures issue 36's million.
var searchInstances = flag.Int("search-instances", 10_000, "instances that BenchmarkSearch stores")

// BenchmarkSearch: the first page of `customer = <one value>` among
// -search-instances instances of 1,000 distinct customers (a page of
// min(n/1000, 100) instances), read through the search index.
func BenchmarkSearch(b *testing.B) {
	storetest.BenchSearch(b, benchStore(b, embedded.Config{}), *searchInstances)
}
