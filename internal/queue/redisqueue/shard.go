package redisqueue

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/queue"
)

// shard is one shard of the queue: its queued hash, lanes, rings, weights,
// turn counters and streams, every key under the shard's hash tag, so that
// each script, which touches many of them, runs on one Redis Cluster slot.
type shard struct {
	index  int
	prefix string // the tag and ":", which every key name starts with
	stream string // prefix + "ready"
	queued string // prefix + "queued"
	used   string // prefix + "used"
	wake   string // prefix + "wake"
	// rings and weights hold the ring and the weight hash of priority p
	// at [p-1].
	rings, weights []string
	// popKeys are popScript's KEYS: the stream, the queued hash, the turn
	// counters, the rings and the weight hashes.
	popKeys []string

	// Guarded by Queue.mu.
	nextReclaim time.Time // when a Pop next looks for entries to take over
	reclaimFrom string    // XAUTOCLAIM cursor
	waiters     int       // this Queue's Pops waiting on the wake stream
	// down: the last of a Pop's calls on the shard failed, with lastErr,
	// and none has succeeded since; the Pops leave the shard to probes
	// while another is up (Queue.popAny).
	down      bool
	lastErr   error
	warned    time.Time // when its failure was last logged
	probing   bool      // a probe runs
	nextProbe time.Time // when a look may start the next probe
}

// layout returns the n shards of the queue whose keys start with prefix
// (the package doc, "Layout"). One shard keeps every key under the tag
// "{prefix}", the layout of the versions before shards; n > 1 shards are
// under the tags partition.Tags(prefix + ":", n), which spread over the
// slots evenly, and so over the masters of a cluster, and never equal the
// single shard's tag.
func layout(prefix string, n int) ([]*shard, error) {
	tags := []string{"{" + prefix + "}"}
	if n > 1 {
		var err error
		if tags, err = partition.Tags(prefix+":", n); err != nil {
			return nil, fmt.Errorf("redisqueue: the tags of %d shards: %w", n, err)
		}
	}
	shards := make([]*shard, len(tags))
	for i, tag := range tags {
		p := tag + ":"
		s := &shard{
			index:       i,
			prefix:      p,
			stream:      p + "ready",
			queued:      p + "queued",
			used:        p + "used",
			wake:        p + "wake",
			reclaimFrom: "0-0",
		}
		for pr := weft.HighestPriority; pr <= weft.LowestPriority; pr++ {
			s.rings = append(s.rings, p+"ring:"+strconv.Itoa(pr))
			s.weights = append(s.weights, p+"weight:"+strconv.Itoa(pr))
		}
		s.popKeys = append([]string{s.stream, s.queued, s.used}, s.rings...)
		s.popKeys = append(s.popKeys, s.weights...)
		shards[i] = s
	}
	return shards, nil
}

// laneKeys returns the KEYS of pushScript and requeueScript for item in s:
// the queued hash, the stream, item's lane, its priority's ring and weight
// hash, and the wake stream; and the weight item orders with.
func (s *shard) laneKeys(item queue.Item) (keys []string, weight int) {
	p, w := place(item)
	return []string{
		s.queued, s.stream,
		s.prefix + "lane:" + strconv.Itoa(p) + ":" + item.Key,
		s.rings[p-1],
		s.weights[p-1],
		s.wake,
	}, w
}

// shardOf returns the shard of an instance: the same on every node with
// the same number of shards, so that pushes for an instance coalesce.
func (q *Queue) shardOf(instanceID string) *shard {
	return q.shards[partition.Of(instanceID, len(q.shards))]
}

// nextStart returns the shard a Pop starts from: the next one at each
// call, so that every shard is looked at first in turn and none starves.
func (q *Queue) nextStart() int {
	return int((q.turn.Add(1) - 1) % uint64(len(q.shards)))
}

// enterWait returns the shard whose wake stream a waiting Pop blocks on:
// of the shards from start on that are up, the first with the fewest of
// this Queue's Pops waiting on it, so that the waiting Pops spread over
// the shards (one a shard while there are fewer than shards); or nil when
// every shard is down. leaveWait undoes it.
func (q *Queue) enterWait(start int) *shard {
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.shards)
	var best *shard
	for i := 0; i < n && (best == nil || best.waiters > 0); i++ {
		s := q.shards[(start+i)%n]
		if !s.down && (best == nil || s.waiters < best.waiters) {
			best = s
		}
	}
	if best != nil {
		best.waiters++
	}
	return best
}

// leaveWait ends a wait that enterWait began.
func (q *Queue) leaveWait(s *shard) {
	q.mu.Lock()
	s.waiters--
	q.mu.Unlock()
}

// anyUp reports whether a shard is up. The caller holds Queue.mu.
func (q *Queue) anyUp() bool {
	return slices.ContainsFunc(q.shards, func(s *shard) bool { return !s.down })
}

// rotation returns the shards from start on, those that are up and those
// that are down, each in turn.
func (q *Queue) rotation(start int) (up, down []*shard) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for i := range q.shards {
		s := q.shards[(start+i)%len(q.shards)]
		if s.down {
			down = append(down, s)
		} else {
			up = append(up, s)
		}
	}
	return up, down
}

// note records the outcome of a Pop's call on s: a failure marks s down,
// and is logged at most once a window per shard (every Pop of a node
// would otherwise log it at each of its tries); a success marks s up
// again. With one shard there is nothing to leave out, and the failed
// Pop's backoff logs (fetch).
func (q *Queue) note(s *shard, err error) {
	now := q.now()
	q.mu.Lock()
	wasDown, warn := s.down, false
	if err != nil {
		s.down, s.lastErr = true, err
		if warn = len(q.shards) > 1 && !now.Before(s.warned.Add(q.window())); warn {
			s.warned = now
		}
	} else {
		s.down, s.lastErr = false, nil
	}
	q.mu.Unlock()
	switch {
	case warn:
		q.log.Warn("redisqueue: a shard failed; popping from the others, and probing it every window", "shard", s.index, "stream", s.stream, "err", err)
	case err == nil && wasDown && len(q.shards) > 1:
		q.log.Info("redisqueue: a shard answers again", "shard", s.index, "stream", s.stream)
	}
}

// allDown returns the error of a Pop that found every shard down: the
// last error of each.
func (q *Queue) allDown() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	errs := make([]error, 0, len(q.shards))
	for _, s := range q.shards {
		if s.lastErr != nil {
			errs = append(errs, s.lastErr)
		}
	}
	return fmt.Errorf("every shard failed: %w", errors.Join(errs...))
}

// probe runs the pop script on s, a shard that is down, on a goroutine of
// its own, since a call to an unreachable Redis can last its whole
// timeout: it marks s up again when it answers, and an item it pops goes
// to the stash, which hands it to a Pop at once. At most one probe of a
// shard runs at a time, and one starts at most once a window.
func (q *Queue) probe(s *shard) {
	now := q.now()
	q.mu.Lock()
	if q.closed || s.probing || now.Before(s.nextProbe) {
		q.mu.Unlock()
		return
	}
	s.probing, s.nextProbe = true, now.Add(q.window())
	q.wg.Add(1)
	q.mu.Unlock()
	go func() {
		defer q.wg.Done()
		d, err := q.popFrom(s)
		q.note(s, err)
		q.mu.Lock()
		s.probing = false
		q.mu.Unlock()
		q.keep(d)
	}()
}

// shardCapacity is the capacity of each of n shards of a queue of the
// given capacity: ceil(capacity/n), so that the shards hold capacity items
// together (rounded up to a multiple of n) when the instances spread over
// them evenly, as partition.Of spreads many.
func shardCapacity(capacity, n int) int {
	return (capacity + n - 1) / n
}
