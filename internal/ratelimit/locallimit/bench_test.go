package locallimit_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/weftworks/weft/internal/ratelimit"
	"github.com/weftworks/weft/internal/ratelimit/locallimit"
)

// BenchmarkReserve is the cost of a reservation from parallel callers,
// on one key and on a key per caller, with the real clock.
func BenchmarkReserve(b *testing.B) {
	lim := ratelimit.Limit{Count: 1_000_000, Per: time.Second, Burst: 100}
	for _, keys := range []string{"one", "many"} {
		b.Run("keys="+keys, func(b *testing.B) {
			l := locallimit.New(locallimit.Config{})
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := "one"
				if keys == "many" {
					key = "k" + strconv.FormatInt(next.Add(1), 10)
				}
				for pb.Next() {
					if _, _, err := l.Reserve(context.Background(), key, lim, time.Second); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
