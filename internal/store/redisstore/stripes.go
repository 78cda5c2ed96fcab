package redisstore

import (
	"context"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// MaxSweepStripes bounds SweepStripes: each stripe is a try-lock every
// node attempts at every turn of every sweep, so that more stripes spread
// the sweeping over more nodes at the cost of more lock attempts.
const MaxSweepStripes = 4

// SweepStripes divides the partitions into min(P, MaxSweepStripes)
// stripes and returns a view of the store per stripe: a view answers the
// reads of the engine's sweeps (DueTimers, ExpiredLeases, WaitingInboxes,
// ExpiredInstances, ListInstances) from its stripe's partitions alone, and
// every other call as the store does. The engine sweeps each stripe under
// a try-lock of its own, so that the nodes share the sweeping instead of
// one node doing it all (docs/cluster.md, "Sweeps by stripes"). Partition
// i is in stripe i mod n. ("Stripe", not "lane": a lane is the queued
// items of one fairness key, docs/architecture.md.) Closing a view closes
// the store.
func (r *Partitioned) SweepStripes() []store.Store {
	n := min(len(r.parts), MaxSweepStripes)
	stripes := make([]store.Store, n)
	for j := range n {
		var share []*Store
		for i := j; i < len(r.parts); i += n {
			share = append(share, r.parts[i])
		}
		stripes[j] = &stripe{Partitioned: r, share: share}
	}
	return stripes
}

// stripe is a view of a partitioned store whose sweep reads cover share.
type stripe struct {
	*Partitioned
	share []*Store
}

// DueTimers is Partitioned.DueTimers over the stripe's partitions.
func (s *stripe) DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error) {
	return s.dueTimersIn(ctx, s.share, now, limit)
}

// WaitingInboxes is Partitioned.WaitingInboxes over the stripe's
// partitions.
func (s *stripe) WaitingInboxes(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return s.mergeSweep(ctx, s.share, limit, func(ctx context.Context, p *Store) ([]keyedID, error) {
		return p.waitingInboxesKeyed(ctx, before, limit)
	})
}

// ExpiredLeases is Partitioned.ExpiredLeases over the stripe's partitions.
func (s *stripe) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	return s.mergeSweep(ctx, s.share, limit, func(ctx context.Context, p *Store) ([]keyedID, error) {
		return p.expiredLeasesKeyed(ctx, now, limit)
	})
}

// ExpiredInstances is Partitioned.ExpiredInstances over the stripe's
// partitions.
func (s *stripe) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	return s.mergeSweep(ctx, s.share, limit, func(ctx context.Context, p *Store) ([]keyedID, error) {
		return p.expiredInstancesKeyed(ctx, now, limit)
	})
}

// ListInstances is Partitioned.ListInstances over the stripe's partitions:
// its cursors are the stripe's own.
func (s *stripe) ListInstances(ctx context.Context, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	return s.listIn(ctx, s.share, f)
}
