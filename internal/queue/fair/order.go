package fair

import (
	"time"

	"github.com/weftworks/weft/host/weft"
)

// Entry is one queued instance and what the order needs to know of it.
type Entry struct {
	// ID names the instance. An ID is queued at most once.
	ID string
	// Priority is 1 (highest) to 5 (lowest); 0 means weft.DefaultPriority.
	// The caller validates it: Push clamps anything else into 1…5 (see
	// the package doc, "Input").
	Priority int
	// Key is the fairness key (a tenant, a customer…); "" is a key like
	// any other.
	Key string
	// Weight is how many consecutive pops Key gets per turn at this
	// priority, at least 1; 0 (or less) means 1. The latest push of a key
	// at a priority sets the weight of that key there.
	Weight int
	// At is when the entry was pushed. The order never reads it: it is
	// shown (Lane.Oldest) so that a metrics or API layer can tell how long
	// a key has been waiting.
	At time.Time
}

// normalize applies the package doc's input rules: Priority 0 is the
// default, other priorities are clamped into 1…5, and a Weight below 1 is 1.
func (e Entry) normalize() Entry {
	e.Priority = normPriority(e.Priority)
	e.Weight = max(e.Weight, 1)
	return e
}

func normPriority(p int) int {
	if p == 0 {
		return weft.DefaultPriority
	}
	return min(max(p, weft.HighestPriority), weft.LowestPriority)
}

// Order is the order in which the ready queue hands out work: priorities
// first, then weighted round-robin between the keys of a priority, then
// FIFO within a key (the package doc states it precisely). The zero Order
// is empty and ready to use.
//
// An Order is not safe for concurrent use: its owner (the in-process queue)
// holds its own lock around every call.
type Order struct {
	// nodes holds the entries and lanes the lanes, each a slab indexed
	// from 1 (0 is "none", so that the zero Order is valid), with a free
	// list threaded through next: a slot is reused, so a steady state of
	// pushes and pops allocates nothing.
	nodes    []node
	lanes    []lane
	freeNode int32
	freeLane int32
	// ids finds an entry by its ID, for duplicate pushes and Remove.
	ids    map[string]int32
	levels [weft.LowestPriority]level
}

// node is one queued entry, linked into its lane.
type node struct {
	e          Entry
	lane       int32
	prev, next int32
}

// lane is the entries of one key at one priority, in push order, and the
// lane's place in its priority's ring.
type lane struct {
	key         string
	weight      int
	n           int
	first, last int32 // nodes
	prev, next  int32 // lanes of the ring
}

// level is one priority: its ring of lanes, head first (the lane whose
// turn it is), and how many pops the head has had in its turn.
type level struct {
	head, tail int32
	used       int
	n          int
	lanes      map[string]int32
}

// Push queues e and reports true, or reports false and changes nothing
// when e.ID is already queued. A key's first entry at a priority puts the
// key at the end of that priority's ring; every push sets the key's weight
// there to e.Weight.
func (o *Order) Push(e Entry) bool {
	if _, ok := o.ids[e.ID]; ok {
		return false
	}
	if o.ids == nil {
		o.ids = map[string]int32{}
	}
	e = e.normalize()
	lv := &o.levels[e.Priority-1]
	li, ok := lv.lanes[e.Key]
	if !ok {
		if lv.lanes == nil {
			lv.lanes = map[string]int32{}
		}
		li = o.newLane()
		o.lanes[li] = lane{key: e.Key, prev: lv.tail}
		if lv.tail != 0 {
			o.lanes[lv.tail].next = li
		} else {
			lv.head = li
		}
		lv.tail = li
		lv.lanes[e.Key] = li
	}
	ni := o.newNode()
	l := &o.lanes[li]
	o.nodes[ni] = node{e: e, lane: li, prev: l.last}
	if l.last != 0 {
		o.nodes[l.last].next = ni
	} else {
		l.first = ni
	}
	l.last = ni
	l.n++
	l.weight = e.Weight
	lv.n++
	o.ids[e.ID] = ni
	return true
}

// Pop takes the next entry: from the highest priority that has entries,
// the first entry of the key whose turn it is. It reports false when the
// order is empty. The entry comes back normalised (Priority 1…5, Weight
// ≥ 1).
func (o *Order) Pop() (Entry, bool) {
	for p := range o.levels {
		lv := &o.levels[p]
		if lv.head == 0 {
			continue
		}
		if lv.used >= o.lanes[lv.head].weight {
			// The head's turn is over: it goes to the end of the ring
			// (a ring of one stays as it is) and the next key's turn
			// begins.
			if h := lv.head; lv.tail != h {
				next := o.lanes[h].next
				o.lanes[next].prev = 0
				lv.head = next
				o.lanes[h].prev, o.lanes[h].next = lv.tail, 0
				o.lanes[lv.tail].next = h
				lv.tail = h
			}
			lv.used = 0
		}
		ni := o.lanes[lv.head].first
		e := o.nodes[ni].e
		lv.used++
		o.take(ni, p)
		return e, true
	}
	return Entry{}, false
}

// Remove takes the entry id out of the order, leaving the others in their
// order, and returns it; it reports false when id is not queued. A key
// whose last entry is removed leaves its ring as if its last entry had
// been popped; the turn of the key at the head of the ring is otherwise
// unchanged.
func (o *Order) Remove(id string) (Entry, bool) {
	ni, ok := o.ids[id]
	if !ok {
		return Entry{}, false
	}
	e := o.nodes[ni].e
	o.take(ni, e.Priority-1)
	return e, true
}

// take unlinks node ni (of level p) from its lane and frees it; a lane it
// leaves empty leaves the ring and is freed, and if that lane was the
// head, the next lane's turn begins with no pops used.
func (o *Order) take(ni int32, p int) {
	lv := &o.levels[p]
	n := &o.nodes[ni]
	li := n.lane
	l := &o.lanes[li]
	if n.prev != 0 {
		o.nodes[n.prev].next = n.next
	} else {
		l.first = n.next
	}
	if n.next != 0 {
		o.nodes[n.next].prev = n.prev
	} else {
		l.last = n.prev
	}
	l.n--
	lv.n--
	delete(o.ids, n.e.ID)
	*n = node{next: o.freeNode}
	o.freeNode = ni
	if l.n > 0 {
		return
	}
	if l.prev != 0 {
		o.lanes[l.prev].next = l.next
	} else {
		lv.head = l.next
		lv.used = 0
	}
	if l.next != 0 {
		o.lanes[l.next].prev = l.prev
	} else {
		lv.tail = l.prev
	}
	delete(lv.lanes, l.key)
	*l = lane{next: o.freeLane}
	o.freeLane = li
	if len(o.ids) == 0 && len(o.nodes) > releaseAbove {
		// Slabs and maps never shrink; an order that empties after a
		// large backlog gives their memory back.
		*o = Order{}
	}
}

// releaseAbove is the number of entry slots above which an Order that
// empties drops its slabs and maps: below it, keeping them costs little
// and saves the allocations of the next burst.
const releaseAbove = 4096

func (o *Order) newNode() int32 {
	if i := o.freeNode; i != 0 {
		o.freeNode = o.nodes[i].next
		return i
	}
	if len(o.nodes) == 0 {
		o.nodes = append(o.nodes, node{}) // slot 0 is "none"
	}
	o.nodes = append(o.nodes, node{})
	return int32(len(o.nodes) - 1)
}

func (o *Order) newLane() int32 {
	if i := o.freeLane; i != 0 {
		o.freeLane = o.lanes[i].next
		return i
	}
	if len(o.lanes) == 0 {
		o.lanes = append(o.lanes, lane{}) // slot 0 is "none"
	}
	o.lanes = append(o.lanes, lane{})
	return int32(len(o.lanes) - 1)
}
