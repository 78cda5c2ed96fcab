package redisstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/redistest"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/internal/store/redisstore"
	"github.com/weftworks/weft/internal/store/storetest"
)

// open opens a store on c under prefix with clock now.
func open(t testing.TB, c redis.UniversalClient, prefix string, now func() time.Time) *redisstore.Store {
	t.Helper()
	s, err := redisstore.Open(context.Background(), redisstore.Config{Client: c, Prefix: prefix, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestConformance runs the store suite on one real redis-server; every
// subtest has a key prefix of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	exercise(t, redistest.Start(t).Client(t), "conformance", new(atomic.Int64))
}

// exercise runs the conformance suite on c, each subtest under a key
// prefix of its own, name-N, counting them in n (its subtests run in
// parallel: n is whole once t's parent subtest has returned).
func exercise(t *testing.T, c redis.UniversalClient, name string, n *atomic.Int64) {
	storetest.Exercise(t, func(t *testing.T, now func() time.Time) (store.Store, func() store.Store) {
		prefix := fmt.Sprintf("%s-%d:", name, n.Add(1))
		s := open(t, c, prefix, now)
		reopen := func() store.Store {
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			s = open(t, c, prefix, now)
			return s
		}
		return s, reopen
	})
}
