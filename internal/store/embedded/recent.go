package embedded

import (
	"sync"

	"github.com/cockroachdb/pebble/v2"
)

// Bounds of a Pebble store's recent values: what they may hold in all, in
// keys, and in one value (a larger one is read from Pebble).
const (
	recentMaxBytes = 8 << 20
	recentMaxKeys  = 32 << 10
	recentMaxValue = 64 << 10
)

// recentBuckets are the buckets whose values a Pebble store remembers
// (recent): a run reads the instance record and state that its start has
// just written, and its commit reads the record again; every start's
// commit reads the plugin records it pins; reads of an instance look for
// its inbox's wait, and a commit that ends one for its heartbeats' mark,
// which are mostly not there. Measured with seq3 at 50 in flight, those
// reads through Pebble's memtables and levels were about a tenth of the
// host's CPU.
var recentBuckets = [][]byte{bInst, bState, bPlugins, bInboxWait, bBeatsOf}

// recent is a Pebble engine's memory of the values that its last commits
// wrote to keys of recentBuckets. Every write of the store goes through
// this process and its engine's update (one at a time), so the memory is
// exact, for every transaction:
//
//   - a write transaction (update, which holds the writer lock) starts
//     after the commits before it were remembered, and reads from memory
//     only the keys it has not written itself;
//   - a read transaction (view) notes the generation (commits remembered)
//     before it takes its snapshot, and reads from memory a value
//     remembered at or before that generation and not being committed
//     again now. A commit marks its keys before its batch becomes visible
//     and remembers their values after, under a new generation, so a value
//     the snapshot holds a newer one of is being committed or newer than
//     the noted generation, and a value the snapshot does not hold yet is
//     newer than the noted generation.
//
// Memory holds absent keys too: deleted, or found missing by a write
// transaction, or known missing by the store (knownAbsent). What memory
// lacks, the transaction reads from Pebble; a write transaction then
// remembers what it read (current: it holds the writer lock), under the
// current generation. Values are forgotten oldest first, beyond
// recentMaxBytes or recentMaxKeys.
type recent struct {
	mu sync.Mutex
	// gen counts the commits remembered, begun the commits begun (a
	// commit that writes none of recentBuckets' keys is neither).
	gen, begun uint64
	// committing are the keys of the commit in progress.
	committing map[string]struct{}
	vals       map[string]recentValue
	// queue holds the keys in the order they were remembered, oldest at
	// head; an item whose stamp is not its key's is stale.
	queue []recentItem
	head  int
	// stamp numbers the values remembered; bytes is their size.
	stamp, bytes uint64
}

// recentValue is a key's value, nil when the key is absent.
type recentValue struct {
	v          []byte
	gen, stamp uint64
}

type recentItem struct {
	key   string
	stamp uint64
}

// recentWrite is a write of a transaction to a key of recentBuckets
// (whole key: the bucket's prefix and the key): v is the value put, nil
// for a delete (or a key known absent); with forget, the key is not
// remembered (a value larger than recentMaxValue).
type recentWrite struct {
	key    string
	v      []byte
	forget bool
}

// exactGen is the generation of a write transaction's reads: every value
// remembered is current for it.
const exactGen = ^uint64(0)

func newRecent() *recent {
	return &recent{committing: map[string]struct{}{}, vals: map[string]recentValue{}}
}

// generation returns the commits remembered so far, which a read
// transaction notes before it takes its snapshot, and the commits begun.
func (r *recent) generation() (gen, begun uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.gen, r.begun
}

// snapshot returns take() if no commit has begun since begun commits had,
// nil otherwise. No commit begins while take runs: one that began after
// would otherwise be visible in the snapshot, beside values that the
// transaction took from memory before it began.
func (r *recent) snapshot(begun uint64, take func() *pebble.Snapshot) *pebble.Snapshot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.begun != begun {
		return nil
	}
	return take()
}

// get returns the value of key as a transaction of generation gen sees it,
// nil when absent, if remembered; ok is false when it must be read from
// Pebble. The value is shared: the caller must not modify it.
func (r *recent) get(key []byte, gen uint64) (v []byte, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, busy := r.committing[string(key)]; busy {
		return nil, false
	}
	rv, ok := r.vals[string(key)]
	if !ok || rv.gen > gen {
		return nil, false
	}
	return rv.v, true
}

// fill remembers v, read from Pebble by a write transaction, as key's
// value (current: no commit is in progress) since the current generation;
// nil: the key is absent. v must not change after.
func (r *recent) fill(key []byte, v []byte) {
	if len(v) > recentMaxValue {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	k := string(key)
	if _, ok := r.vals[k]; ok {
		return
	}
	r.remember(k, v)
	r.evict()
}

// begin marks the keys of a commit about to be made visible.
func (r *recent) begin(writes []recentWrite) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.begun++
	for _, w := range writes {
		r.committing[w.key] = struct{}{}
	}
}

// end follows the commit that begin announced: committed, its values
// (and absent keys) are remembered, in order (the last write of a key
// wins); otherwise, and for values larger than recentMaxValue, its keys
// are forgotten.
func (r *recent) end(writes []recentWrite, committed bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.gen++
	for _, w := range writes {
		delete(r.committing, w.key)
		if old, ok := r.vals[w.key]; ok {
			r.bytes -= uint64(len(w.key) + len(old.v))
			delete(r.vals, w.key)
		}
		if !committed || w.forget {
			continue
		}
		r.remember(w.key, w.v)
	}
	r.evict()
}

// remember keeps v as key's value since the current generation; key has
// none.
func (r *recent) remember(key string, v []byte) {
	r.stamp++
	r.vals[key] = recentValue{v: v, gen: r.gen, stamp: r.stamp}
	r.bytes += uint64(len(key) + len(v))
	r.queue = append(r.queue, recentItem{key: key, stamp: r.stamp})
}

// evict forgets the oldest values beyond the bounds.
func (r *recent) evict() {
	for r.bytes > recentMaxBytes || len(r.queue)-r.head > recentMaxKeys {
		it := r.queue[r.head]
		r.queue[r.head] = recentItem{}
		r.head++
		if rv, ok := r.vals[it.key]; ok && rv.stamp == it.stamp {
			r.bytes -= uint64(len(it.key) + len(rv.v))
			delete(r.vals, it.key)
		}
	}
	// The queue's consumed head is dropped once it is half the queue.
	if r.head > len(r.queue)/2 {
		r.queue = append(r.queue[:0], r.queue[r.head:]...)
		r.head = 0
	}
}
