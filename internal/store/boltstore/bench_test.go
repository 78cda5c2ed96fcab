package boltstore_test

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/weftworks/weft/internal/store/boltstore"
	"github.com/weftworks/weft/internal/store/storetest"
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

// BenchmarkCommitWriters shows what group commit does for 1 to 200
// concurrent writers: a lone writer pays one commit, many share one.
func BenchmarkCommitWriters(b *testing.B) {
	for _, writers := range []int{1, 10, 50, 200} {
		b.Run(fmt.Sprintf("writers=%d", writers), func(b *testing.B) {
			storetest.BenchCommits(b, benchStore(b, boltstore.Config{}), writers)
		})
	}
}
