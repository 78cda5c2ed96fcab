package fair

import (
	"iter"
	"time"
)

// Lane is what the order holds for one key at one priority: the summary a
// metrics or API layer reads (queued count and oldest wait per key), kept
// up to date by every push, pop and remove, so reading it costs no scan of
// the entries.
type Lane struct {
	// Priority and Key name the lane.
	Priority int
	Key      string
	// Weight is the weight of the key's latest push at this priority.
	Weight int
	// Queued is the number of entries in the lane, at least 1: a key
	// without entries at a priority has no lane there.
	Queued int
	// Oldest is the At of the lane's first entry, the one it pops next:
	// the entry that has waited longest when At grows with pushes (a
	// clock that steps back can make a later entry older).
	Oldest time.Time
}

// Len returns the number of queued entries.
func (o *Order) Len() int { return len(o.ids) }

// LenAt returns the number of entries queued at a priority (normalised as
// Push does: 0 is weft.DefaultPriority).
func (o *Order) LenAt(priority int) int { return o.levels[normPriority(priority)-1].n }

// Lane returns the lane of key at priority (normalised as Push does), or
// false when key has no entries there. It costs one map lookup.
func (o *Order) Lane(priority int, key string) (Lane, bool) {
	p := normPriority(priority)
	li, ok := o.levels[p-1].lanes[key]
	if !ok {
		return Lane{}, false
	}
	return o.lane(p, li), true
}

// Key sums the lanes of key over every priority: how many entries it has
// queued and the earliest Oldest among its lanes (zero when none). It
// costs one map lookup per priority.
func (o *Order) Key(key string) (queued int, oldest time.Time) {
	for p := range o.levels {
		li, ok := o.levels[p].lanes[key]
		if !ok {
			continue
		}
		l := o.lane(p+1, li)
		if queued == 0 || l.Oldest.Before(oldest) {
			oldest = l.Oldest
		}
		queued += l.Queued
	}
	return queued, oldest
}

// Lanes yields every lane: by priority, highest first, and within a
// priority in ring order from its head, the key whose turn it is (or was:
// when the head has used up its turn, the next pop passes it on). It costs O(lanes), with no allocation per lane; the
// order must not change while it runs.
func (o *Order) Lanes() iter.Seq[Lane] {
	return func(yield func(Lane) bool) {
		for p := range o.levels {
			for li := o.levels[p].head; li != 0; li = o.lanes[li].next {
				if !yield(o.lane(p+1, li)) {
					return
				}
			}
		}
	}
}

func (o *Order) lane(p int, li int32) Lane {
	l := &o.lanes[li]
	return Lane{Priority: p, Key: l.key, Weight: l.weight, Queued: l.n, Oldest: o.nodes[l.first].e.At}
}
