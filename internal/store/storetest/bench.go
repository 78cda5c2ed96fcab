package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// BenchCommits measures durable creates: writers goroutines create b.N
// instances (each with about 1 KiB of vars and one history event) in s, and
// it reports commits/s. A driver's BenchmarkCommitParallel calls it.
func BenchCommits(b *testing.B, s store.Store, writers int) {
	b.Helper()
	vars, _ := json.Marshal(map[string]string{"pad": strings.Repeat("x", 1000)})
	ctx := context.Background()
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	for w := range writers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				in := &weft.Instance{
					ID: fmt.Sprintf("bench-%d-%d", w, i), Workflow: "bench", Status: weft.StatusPending, Vars: vars,
				}
				if _, err := s.Commit(ctx, store.Commit{Instance: in, History: []weft.HistoryEntry{{Type: "created"}}}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
}
