package boltstore_test

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/weftworks/weft/host/store/boltstore"
	"github.com/weftworks/weft/host/store/storetest"
)

func benchStore(b *testing.B, cfg boltstore.Config) *boltstore.Store {
	s, err := boltstore.Open(filepath.Join(b.TempDir(), "weft.db"), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = s.Close() })
	return s
}

// BenchmarkCommitParallel: 50 goroutines creating instances, every create
// durable (fsync) when Commit returns; the default configuration.
func BenchmarkCommitParallel(b *testing.B) {
	storetest.BenchCommits(b, benchStore(b, boltstore.Config{}), 50)
}

// BenchmarkCommitBatchDelay shows what MaxBatchDelay trades: a lone
// writer's latency against the throughput of many.
func BenchmarkCommitBatchDelay(b *testing.B) {
	for _, delay := range []time.Duration{200 * time.Microsecond, time.Millisecond, 2 * time.Millisecond, 10 * time.Millisecond} {
		for _, writers := range []int{1, 50} {
			b.Run(fmt.Sprintf("delay=%s/writers=%d", delay, writers), func(b *testing.B) {
				storetest.BenchCommits(b, benchStore(b, boltstore.Config{MaxBatchDelay: delay}), writers)
			})
		}
	}
}
