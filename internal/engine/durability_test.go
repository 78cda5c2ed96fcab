package engine_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// laggingReplicas is a store whose replicas fall behind while behind is
// set, as redisstore with WaitReplicas sees it: a create is applied and
// then answered as not durable, and BarrierOf fails.
type laggingReplicas struct {
	store.Store
	behind   atomic.Bool
	barriers atomic.Int32
}

func (s *laggingReplicas) Commit(ctx context.Context, c store.Commit) (uint64, error) {
	rev, err := s.Store.Commit(ctx, c)
	if err == nil && s.behind.Load() {
		return 0, fmt.Errorf("instance %s: %w: %w", c.Instance.ID, weft.ErrUnavailable, store.ErrNotDurable)
	}
	return rev, err
}

func (s *laggingReplicas) BarrierOf(context.Context, string) error {
	s.barriers.Add(1)
	if s.behind.Load() {
		return fmt.Errorf("0 of 1 replicas: %w: %w", weft.ErrUnavailable, store.ErrNotDurable)
	}
	return nil
}

// TestRetriedStartWaitsForDurability: a start whose create was applied
// but not confirmed durable fails, and so does its retry, which finds the
// instance, until the store says what it holds is durable: a start is
// never answered from a create a failover could still lose.
func TestRetriedStartWaitsForDurability(t *testing.T) {
	t.Parallel()
	lag := &laggingReplicas{}
	h := newHost(t, withStore(func(st store.Store) store.Store { lag.Store = st; return lag }))
	h.save(`
name: once
steps: [ { id: e, activity: kit.echo, input: 1 } ]
`)
	ctx := context.Background()
	lag.behind.Store(true)
	if _, _, err := h.e.Start(ctx, "once", nil, "s1"); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("start with the replicas behind: %v, want ErrNotDurable", err)
	}
	if _, _, err := h.e.Start(ctx, "once", nil, "s1"); !errors.Is(err, store.ErrNotDurable) {
		t.Fatalf("retried start with the replicas behind: %v, want ErrNotDurable", err)
	}
	if lag.barriers.Load() == 0 {
		t.Fatal("the retried start found the instance without asking the store's barrier")
	}
	lag.behind.Store(false)
	inst, created, err := h.e.Start(ctx, "once", nil, "s1")
	if err != nil || created || inst.ID != "s1" {
		t.Fatalf("retried start with the replicas caught up: %+v, created %t, %v; want the instance, not created", inst, created, err)
	}
}
