package redisstore

import (
	"context"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store"
)

// MaxSweepLanes bounds SweepLanes: each lane is a try-lock every node
// attempts at every turn of every sweep, so that more lanes spread the
// sweeping over more nodes at the cost of more lock attempts.
const MaxSweepLanes = 4

// SweepLanes divides the partitions into min(P, MaxSweepLanes) lanes and
// returns a view of the store per lane: a view answers the reads of the
// engine's sweeps (DueTimers, ExpiredLeases, WaitingInboxes,
// ExpiredInstances, ListInstances) from its lane's partitions alone, and
// every other call as the store does. The engine sweeps each lane under a
// try-lock of its own, so that the nodes share the sweeping instead of one
// node doing it all (docs/cluster.md, "Partitions"). Partition i is in
// lane i mod n. Closing a view closes the store.
func (r *Partitioned) SweepLanes() []store.Store {
	n := min(len(r.parts), MaxSweepLanes)
	lanes := make([]store.Store, n)
	for l := range n {
		var share []*Store
		for i := l; i < len(r.parts); i += n {
			share = append(share, r.parts[i])
		}
		lanes[l] = &lane{Partitioned: r, share: share}
	}
	return lanes
}

// lane is a view of a partitioned store whose sweep reads cover share.
type lane struct {
	*Partitioned
	share []*Store
}

// DueTimers is Partitioned.DueTimers over the lane's partitions.
func (l *lane) DueTimers(ctx context.Context, now time.Time, limit int) ([]weft.Timer, error) {
	return l.dueTimersIn(ctx, l.share, now, limit)
}

// WaitingInboxes is Partitioned.WaitingInboxes over the lane's partitions.
func (l *lane) WaitingInboxes(ctx context.Context, before time.Time, limit int) ([]string, error) {
	return l.mergeSweep(ctx, l.share, limit, func(ctx context.Context, p *Store) ([]keyedID, error) {
		return p.waitingInboxesKeyed(ctx, before, limit)
	})
}

// ExpiredLeases is Partitioned.ExpiredLeases over the lane's partitions.
func (l *lane) ExpiredLeases(ctx context.Context, now time.Time, limit int) ([]string, error) {
	return l.mergeSweep(ctx, l.share, limit, func(ctx context.Context, p *Store) ([]keyedID, error) {
		return p.expiredLeasesKeyed(ctx, now, limit)
	})
}

// ExpiredInstances is Partitioned.ExpiredInstances over the lane's
// partitions.
func (l *lane) ExpiredInstances(ctx context.Context, now time.Time, limit int) ([]string, error) {
	return l.mergeSweep(ctx, l.share, limit, func(ctx context.Context, p *Store) ([]keyedID, error) {
		return p.expiredInstancesKeyed(ctx, now, limit)
	})
}

// ListInstances is Partitioned.ListInstances over the lane's partitions:
// its cursors are the lane's own.
func (l *lane) ListInstances(ctx context.Context, f weft.InstanceFilter) ([]weft.Instance, string, error) {
	return l.listIn(ctx, l.share, f)
}
