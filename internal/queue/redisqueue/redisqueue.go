package redisqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/queue"
)

const (
	// group is the one consumer group every node reads the stream through.
	group = "workers"
	// waiters is the group through which waiting Pops take wake tokens:
	// each token goes to one Pop, and with NOACK none is ever pending.
	waiters = "waiters"
	// wakeTokens bounds the wake stream (approximately: MAXLEN ~). A
	// burst of pushes wakes about this many waiting Pops at once; the
	// others find the rest when a woken Pop's worker comes back for more,
	// or at the next look.
	wakeTokens = 64
)

const (
	// blockMax bounds one wait for a wake token, so that a waiting Pop
	// looks for entries to take over, and looks at the lanes of every
	// shard, at least this often.
	blockMax = time.Second
	// pushPollMin and pushPollMax bound the polls of a Push waiting for
	// room; pops on other nodes cannot wake it.
	pushPollMin = 50 * time.Millisecond
	pushPollMax = time.Second
	// retryMax bounds the backoff of a Pop whose Redis calls fail.
	retryMax = 2 * time.Second
	// callTimeout bounds one call a Pop makes outside a wait, and the
	// calls Close makes to hand entries back.
	callTimeout = 5 * time.Second
)

// Config configures a Queue. Client and Consumer are required; New fills
// every other unset field.
type Config struct {
	// Client is the Redis connection (a client, a failover client or a
	// cluster client). Required. Pops hold a connection while they wait, so
	// its pool must be larger than the number of concurrent Pops.
	Client redis.UniversalClient

	// Consumer names this node in the consumer group: its node id, unique
	// among live nodes. Required.
	Consumer string

	// Capacity is the number of queued (pushed, not yet popped) items at
	// which Push waits, but for the pushes of a lane below its fair share
	// (queue.FairShare: max(1, Capacity/100), 10 by default), which wait
	// only at 2×Capacity (the package doc, "Backpressure"). With several
	// Shards, each shard has ceil(Capacity/Shards) of it, and the rule
	// holds within the shard of the pushed item. Defaults to 1024.
	Capacity int

	// Shards is the number of shards the queue is divided into, each
	// under a hash tag of its own, so that a Redis Cluster spreads the
	// queue's pushes, pops and acks over its masters. An item goes to the
	// shard of its instance id; the fair order and the Capacity hold
	// within each shard, and every Pop takes from all of them (the
	// package doc, "Shards"). 1 keeps every key under one tag, the layout
	// of the versions before shards; more than 1 needs Redis 7.0 or
	// newer. From 1 to partition.Max; New computes the shards' tags,
	// which takes time quadratic in their number (4ms for 64 on the
	// two-core reference machine, half a second for 1,024). Every node of
	// a deployment must have the same (the package doc, "Notes").
	// Defaults to 1.
	Shards int

	// VisibilityTimeout is how long an entry popped by a node that stopped
	// (crashed, or paused) stays with it before another node takes it
	// over. A live node keeps its entries however long it works on them.
	// At least 10ms. Defaults to 30s.
	VisibilityTimeout time.Duration

	// Prefix starts the Redis keys, inside a cluster hash tag: the tag is
	// "{Prefix}" with one shard, and "{Prefix:Q~S}" for shard Q of
	// several (partition.Tags). It must not contain braces. Defaults to
	// "weft:queue".
	Prefix string

	// Logger receives the queue's logs: Redis errors while popping,
	// malformed entries, entries taken over. Defaults to slog.Default().
	Logger *slog.Logger

	// Now is the clock that schedules the look for entries to take over.
	// (Idle times themselves are measured by Redis.) Defaults to time.Now.
	Now func() time.Time
}

// WithDefaults returns a copy of c with every unset optional field set to
// its default.
func (c Config) WithDefaults() Config {
	if c.Capacity == 0 {
		c.Capacity = 1024
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = 30 * time.Second
	}
	if c.Prefix == "" {
		c.Prefix = "weft:queue"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	switch {
	case c.Client == nil:
		return errors.New("redisqueue: Config.Client is required")
	case c.Consumer == "":
		return errors.New("redisqueue: Config.Consumer is required (the node id)")
	case c.Capacity < 1:
		return fmt.Errorf("redisqueue: Config.Capacity must be at least 1, got %d", c.Capacity)
	case c.Shards < 1 || c.Shards > partition.Max:
		return fmt.Errorf("redisqueue: Config.Shards must be from 1 to %d, got %d", partition.Max, c.Shards)
	case c.VisibilityTimeout < 10*time.Millisecond:
		return fmt.Errorf("redisqueue: Config.VisibilityTimeout must be at least 10ms, got %s", c.VisibilityTimeout)
	case strings.ContainsAny(c.Prefix, "{}"):
		return fmt.Errorf("redisqueue: Config.Prefix %q must not contain braces (it goes inside a hash tag)", c.Prefix)
	}
	return nil
}

// Queue is a queue.Queue on Redis, safe for concurrent use. Close it when
// done: it runs a keep-alive in the background.
type Queue struct {
	client   redis.UniversalClient
	consumer string
	capacity int // each shard's: ceil(Config.Capacity / shards)
	share    int // queue.FairShare(capacity)
	vt       time.Duration
	log      *slog.Logger
	now      func() time.Time
	shards   []*shard
	scripts  *scripts
	turn     atomic.Uint64 // counts Pops, whose start shards rotate

	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu       sync.Mutex
	closed   bool
	stash    []*delivery            // read for a Pop that had given up, or by a probe
	stashed  chan struct{}          // closed and replaced when an entry is stashed
	held     map[entryRef]*delivery // handed out or stashed, not acked
	room     chan struct{}          // closed and replaced when an item is popped here
	nextLook time.Time              // when a waiting Pop next looks at the lanes unwoken
}

// entryRef names a stream entry: two shards' streams may give the same ID.
type entryRef struct {
	shard int
	id    string
}

// New returns a Queue; it makes no call to Redis, so a node can start while
// Redis is down. The stream and groups are created on first use.
func New(cfg Config) (*Queue, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	shards, err := layout(cfg.Prefix, cfg.Shards)
	if err != nil {
		return nil, err
	}
	capacity := shardCapacity(cfg.Capacity, cfg.Shards)
	q := &Queue{
		client:   cfg.Client,
		consumer: cfg.Consumer,
		capacity: capacity,
		share:    queue.FairShare(capacity),
		vt:       cfg.VisibilityTimeout,
		log:      cfg.Logger.With("queue", cfg.Prefix, "consumer", cfg.Consumer),
		now:      cfg.Now,
		shards:   shards,
		scripts:  plainScripts,
		done:     make(chan struct{}),
		held:     map[entryRef]*delivery{},
		room:     make(chan struct{}),
		stashed:  make(chan struct{}),
	}
	if len(shards) > 1 {
		q.scripts = guardedScripts
	}
	q.wg.Add(1)
	go q.keepAlive()
	return q, nil
}

// place returns the priority and weight that order item (the input rules
// of internal/queue/fair: priority 0 is the default, others are clamped
// into 1…5, a weight below 1 is 1).
func place(item queue.Item) (priority, weight int) {
	priority = item.Priority
	if priority == 0 {
		priority = weft.DefaultPriority
	}
	return min(max(priority, weft.HighestPriority), weft.LowestPriority), max(item.Weight, 1)
}

// Push implements queue.Queue: it queues item in its instance's shard, and
// waits while queue.Admits refuses it there (the package doc,
// "Backpressure"). It returns ctx.Err() when ctx ends
// while it waits, queue.ErrClosed after Close, and an error naming the
// instance when Redis fails.
func (q *Queue) Push(ctx context.Context, item queue.Item) error {
	if item.InstanceID == "" {
		return errors.New("redisqueue: push: empty instance id")
	}
	v, err := json.Marshal(item)
	if err != nil {
		return fmt.Errorf("redisqueue: encoding instance %s's item: %w", item.InstanceID, err)
	}
	keys, w := q.shardOf(item.InstanceID).laneKeys(item)
	wait := pushPollMin
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		q.mu.Lock()
		closed, room := q.closed, q.room
		q.mu.Unlock()
		if closed {
			return queue.ErrClosed
		}
		n, err := q.scripts.push.Run(ctx, q.client, keys,
			item.InstanceID, string(v), q.capacity, group, item.Key, w, wakeTokens, q.share).Int()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("redisqueue: pushing instance %s: %w", item.InstanceID, err)
		}
		if n >= 0 {
			return nil
		}
		// Refused: wait for a pop here, or poll for pops elsewhere.
		t := time.NewTimer(wait)
		select {
		case <-room:
		case <-t.C:
		case <-ctx.Done():
		case <-q.done:
		}
		t.Stop()
		wait = min(2*wait, pushPollMax)
	}
}

// Pop implements queue.Queue: it takes from every shard, starting from the
// next shard in turn at each call (the package doc, "Shards"). It returns a
// delivery, ctx.Err() when ctx ends first, or queue.ErrClosed after Close;
// Redis errors are logged and retried, and a shard that fails is left to
// probes while another answers.
func (q *Queue) Pop(ctx context.Context) (queue.Delivery, error) {
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return nil, queue.ErrClosed
		}
		var first *delivery
		if len(q.stash) > 0 {
			first = q.stash[0]
			q.stash = q.stash[1:]
			if first.marked {
				q.mu.Unlock()
				return first, nil
			}
		}
		stashed := q.stashed
		q.wg.Add(1)
		q.mu.Unlock()

		got := make(chan *delivery)
		abandon := make(chan struct{})
		deadline, hasDeadline := ctx.Deadline()
		go q.fetch(first, q.nextStart(), deadline, hasDeadline, got, abandon)
		select {
		case d := <-got:
			return d, nil
		case <-ctx.Done():
			close(abandon)
			return nil, ctx.Err()
		case <-q.done:
			close(abandon)
			return nil, queue.ErrClosed
		case <-stashed:
			// An abandoned read got an entry: take it rather than wait
			// for a new one while it sits in the stash.
			close(abandon)
		}
	}
}

// fetch reads one entry for a Pop (or starts from d, a stashed entry whose
// bookkeeping failed), looking at the shards from start on, marks it
// popped, and hands it over on got, or stashes it when the Pop has given
// up (abandon closed) by then. It stops reading when abandon or q.done is
// closed.
func (q *Queue) fetch(d *delivery, start int, deadline time.Time, hasDeadline bool, got chan<- *delivery, abandon <-chan struct{}) {
	defer q.wg.Done()
	backoff := time.Duration(0)
	look := true // pop at once before waiting
	for {
		select {
		case <-abandon:
			q.keep(d)
			return
		case <-q.done:
			q.keep(d)
			return
		default:
		}
		var err error
		if d == nil {
			d, err = q.read(look, start, deadline, hasDeadline)
			look = false
		}
		if err == nil && d != nil {
			if !d.marked {
				err = q.popped(d)
			}
			if err == nil {
				select {
				case got <- d:
				case <-abandon:
					q.keep(d)
				case <-q.done:
					q.keep(d)
				}
				return
			}
		}
		if err == nil {
			backoff = 0
			continue
		}
		look = true // Redis is back: pop at once
		backoff = min(max(2*backoff, 50*time.Millisecond), retryMax)
		q.log.Warn("redisqueue: popping; retrying", "in", backoff, "err", err)
		t := time.NewTimer(backoff)
		select {
		case <-t.C:
		case <-abandon:
		case <-q.done:
		}
		t.Stop()
	}
}

// keep puts a delivery read for a Pop that gave up into the stash, for the
// next Pop or for Close to hand back.
func (q *Queue) keep(d *delivery) {
	if d == nil {
		return
	}
	q.mu.Lock()
	q.stash = append(q.stash, d)
	close(q.stashed)
	q.stashed = make(chan struct{})
	q.mu.Unlock()
}

// read returns an entry taken over from a stopped consumer, or else the
// next item in the fair order of a shard, or nil when none came within one
// wait window. It looks at the shards from start on. It pops from every
// shard before waiting when look is set (a Pop's first read) or when this
// Queue's periodic look is due, which finds what no wake token announced
// (a token lost with a connection, an item of a shard no Pop of this Queue
// waits on, an item pushed by a node of the old version); otherwise it
// waits for a wake token of one shard (enterWait's), and pops from that
// shard when one comes. A shard that failed does not stop the others
// (popAny): it waits on one that is up, and returns an error only when
// every shard is down, or when the shard it waits on fails.
func (q *Queue) read(look bool, start int, deadline time.Time, hasDeadline bool) (*delivery, error) {
	var errs []error
	d, err := q.reclaim(start)
	if d != nil {
		return d, nil
	}
	if err != nil {
		q.mu.Lock()
		up := q.anyUp()
		q.mu.Unlock()
		if !up {
			return nil, err
		}
		errs = append(errs, err)
	}
	if look || q.lookDue() {
		d, err := q.popAny(start)
		if d != nil {
			return d, nil
		}
		errs = append(errs, err)
	}
	block := q.window()
	if hasDeadline {
		block = min(block, time.Until(deadline))
	}
	s := q.enterWait(start)
	if s == nil {
		if err := errors.Join(errs...); err != nil {
			return nil, err
		}
		return nil, q.allDown()
	}
	woke, err := q.waitWake(s, max(block, time.Millisecond))
	q.leaveWait(s)
	q.note(s, err)
	if err != nil || !woke {
		return nil, err
	}
	d, err = q.popFrom(s)
	q.note(s, err)
	return d, err
}

// window is the longest wait for a wake token: at most 1s, and at most a
// quarter of the visibility timeout, so that entries to take over are
// looked for in time. It is also the period of the look at every shard.
func (q *Queue) window() time.Duration { return min(blockMax, q.vt/4) }

// lookDue reports whether it is time for a waiting Pop of this Queue to
// look at the lanes of every shard without a wake token, once per wait
// window.
func (q *Queue) lookDue() bool {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if now.Before(q.nextLook) {
		return false
	}
	q.nextLook = now.Add(q.window())
	return true
}

// waitWake waits up to block for a wake token of shard s (a push's, or a
// hand-back's) and reports whether one came.
func (q *Queue) waitWake(s *shard, block time.Duration) (bool, error) {
	// Not the Pop's ctx: a cancelled read loses its connection, and the
	// token Redis may have handed it. The window bounds the call instead,
	// and the Pop does not wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), block+callTimeout)
	defer cancel()
	res, err := q.client.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    waiters,
		Consumer: q.consumer,
		Streams:  []string{s.wake, ">"},
		Count:    1,
		Block:    block,
		NoAck:    true,
	}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case isNoGroup(err):
		return false, q.ensureGroups(ctx, s)
	case err != nil:
		return false, fmt.Errorf("waiting on %s: %w", s.wake, err)
	}
	return len(res) > 0 && len(res[0].Messages) > 0, nil
}

// popAny pops from the shards in turn from start on, and returns the first
// item one gives, or nil when none has any: a shard with nothing queued
// costs one script. A shard whose Redis fails does not stop the others:
// it is marked down (note), and while another shard is up the Pops leave
// it out, since a call to an unreachable Redis can last its whole
// timeout, and start a probe of it instead, at most once a window. When
// every shard is down, each is tried. The errors are returned when no
// shard gave an item.
func (q *Queue) popAny(start int) (*delivery, error) {
	up, down := q.rotation(start)
	if len(up) == 0 {
		up, down = down, nil
	}
	for _, s := range down {
		q.probe(s)
	}
	var errs []error
	for _, s := range up {
		d, err := q.popFrom(s)
		q.note(s, err)
		if d != nil {
			return d, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return nil, errors.Join(errs...)
}

// popFrom pops the next item in s's fair order with the pop script (or an
// undelivered old-version entry of its stream), or returns nil when
// nothing is queued there. It drops malformed entries and pops again.
func (q *Queue) popFrom(s *shard) (*delivery, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	created := false
	for {
		res, err := q.scripts.pop.Run(ctx, q.client, s.popKeys,
			group, q.consumer, weft.LowestPriority).Slice()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if isNoGroup(err) && !created {
			if err := q.ensureGroups(ctx, s); err != nil {
				return nil, err
			}
			created = true
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("popping from %s: %w", s.queued, err)
		}
		m, err := message(res)
		if err != nil {
			return nil, fmt.Errorf("popping from %s: %w", s.queued, err)
		}
		if d := q.entry(ctx, s, m); d != nil {
			d.marked = true // the script did the bookkeeping
			q.signalRoom()
			return d, nil
		}
	}
}

// message reads popScript's answer, {entry ID, {field, value...}}.
func message(res []any) (redis.XMessage, error) {
	var m redis.XMessage
	var fields []any
	ok := len(res) == 2
	if ok {
		m.ID, ok = res[0].(string)
	}
	if ok {
		fields, ok = res[1].([]any)
	}
	if !ok || len(fields)%2 != 0 {
		return m, fmt.Errorf("script answered %v", res)
	}
	m.Values = make(map[string]any, len(fields)/2)
	for i := 0; i < len(fields); i += 2 {
		k, _ := fields[i].(string)
		m.Values[k] = fields[i+1]
	}
	return m, nil
}

// reclaim takes over one entry idle for longer than the visibility timeout
// from the shards whose look is due (every VisibilityTimeout/4 per shard),
// from start on. After a success it looks at that shard again at once, so
// that a dead node's entries move as fast as they are popped. A shard
// whose Redis fails does not stop the others: as in popAny, a shard that
// is down is left out while another is up (and looked at once it is up
// again), and the errors are returned when no shard gave an entry.
func (q *Queue) reclaim(start int) (*delivery, error) {
	now := q.now()
	var due []*shard
	q.mu.Lock()
	anyUp := q.anyUp()
	for i := range q.shards {
		s := q.shards[(start+i)%len(q.shards)]
		if s.down && anyUp {
			continue
		}
		if !now.Before(s.nextReclaim) {
			s.nextReclaim = now.Add(q.vt / 4)
			due = append(due, s)
		}
	}
	q.mu.Unlock()
	var errs []error
	for i, s := range due {
		d, err := q.reclaimShard(s, now)
		q.note(s, err)
		if d != nil {
			// The shards not looked at yet are looked at by the next read.
			q.mu.Lock()
			for _, s := range due[i+1:] {
				s.nextReclaim = now
			}
			q.mu.Unlock()
			return d, nil
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return nil, errors.Join(errs...)
}

// reclaimShard takes over one entry of s idle for longer than the visibility
// timeout (XAUTOCLAIM from the shard's cursor), or returns nil.
func (q *Queue) reclaimShard(s *shard, now time.Time) (*delivery, error) {
	q.mu.Lock()
	from := s.reclaimFrom
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	msgs, next, err := q.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   s.stream,
		Group:    group,
		Consumer: q.consumer,
		MinIdle:  q.vt,
		Start:    from,
		Count:    1,
	}).Result()
	if isNoGroup(err) {
		return nil, q.ensureGroups(ctx, s)
	}
	if err != nil {
		return nil, fmt.Errorf("taking over idle entries of %s: %w", s.stream, err)
	}
	q.mu.Lock()
	s.reclaimFrom = next
	if len(msgs) > 0 || next != "0-0" {
		s.nextReclaim = now // more may be waiting
	}
	q.mu.Unlock()
	if len(msgs) == 0 { // Count is 1
		return nil, nil
	}
	d := q.entry(ctx, s, msgs[0])
	if d != nil {
		q.log.Info("redisqueue: took over an entry from a stopped consumer", "instance", d.item.InstanceID, "stream", s.stream, "entry", d.id)
	}
	return d, nil
}

// entry turns a stream message of s into a delivery held by this Queue, or
// acknowledges and drops a malformed one (it cannot be run, and left
// pending it would be redelivered forever). An entry that popScript added
// carries its item, whose bookkeeping is done (marked); one of the old
// version carries the instance and the reason, and its bookkeeping may
// not be.
func (q *Queue) entry(ctx context.Context, s *shard, m redis.XMessage) *delivery {
	inst, _ := m.Values["instance"].(string)
	if inst == "" {
		q.log.Error("redisqueue: dropping a malformed entry (no instance field)", "stream", s.stream, "entry", m.ID, "values", m.Values)
		if err := q.scripts.ack.Run(ctx, q.client, []string{s.stream, s.queued}, group, m.ID, "").Err(); err != nil {
			q.log.Warn("redisqueue: acknowledging a malformed entry", "stream", s.stream, "entry", m.ID, "err", err)
		}
		return nil
	}
	d := &delivery{q: q, s: s, id: m.ID}
	if v, ok := m.Values["item"].(string); ok {
		d.marked = true
		if err := json.Unmarshal([]byte(v), &d.item); err != nil {
			// The instance has work in the store whatever its order was.
			q.log.Warn("redisqueue: an entry's item is unreadable; delivering its instance alone", "instance", inst, "stream", s.stream, "entry", m.ID, "err", err)
			d.item = queue.Item{}
		}
	} else {
		d.item.Reason, _ = m.Values["reason"].(string)
	}
	d.item.InstanceID = inst
	q.mu.Lock()
	q.held[d.ref()] = d
	q.mu.Unlock()
	return d
}

// popped does the coalescing bookkeeping of an old-version entry taken
// over from a consumer that may have died before doing it: from now on a
// Push for its instance queues a new item.
func (q *Queue) popped(d *delivery) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := q.scripts.popped.Run(ctx, q.client, []string{d.s.queued}, d.item.InstanceID, d.id).Err(); err != nil {
		return fmt.Errorf("marking instance %s (entry %s of %s) popped: %w", d.item.InstanceID, d.id, d.s.stream, err)
	}
	d.marked = true
	q.signalRoom()
	return nil
}

// signalRoom wakes the Pushes waiting here for room.
func (q *Queue) signalRoom() {
	q.mu.Lock()
	close(q.room)
	q.room = make(chan struct{})
	q.mu.Unlock()
}

// ensureGroups creates s's stream's consumer group and its wake stream's,
// each at ID 0 (so that entries and tokens added before the first read
// count) unless it exists.
func (q *Queue) ensureGroups(ctx context.Context, s *shard) error {
	for _, g := range [...]struct{ stream, group string }{{s.stream, group}, {s.wake, waiters}} {
		err := q.client.XGroupCreateMkStream(ctx, g.stream, g.group, "0").Err()
		if err != nil && !strings.HasPrefix(err.Error(), "BUSYGROUP") {
			return fmt.Errorf("creating group %s on %s: %w", g.group, g.stream, err)
		}
	}
	return nil
}

func isNoGroup(err error) bool {
	// Inside a script the error keeps its code but may be prefixed.
	return err != nil && strings.Contains(err.Error(), "NOGROUP")
}

// Depth implements queue.Queue: the number of queued items not yet popped,
// in every shard (one pipeline, which a cluster client sends to each
// master in parallel).
func (q *Queue) Depth(ctx context.Context) (int, error) {
	pipe := q.client.Pipeline()
	lens := make([]*redis.IntCmd, len(q.shards))
	for i, s := range q.shards {
		lens[i] = pipe.HLen(ctx, s.queued)
	}
	_, err := pipe.Exec(ctx)
	if err != nil && ctx.Err() != nil {
		return 0, ctx.Err()
	}
	n := 0
	for i, c := range lens {
		if err := c.Err(); err != nil {
			return 0, fmt.Errorf("redisqueue: depth of %s: %w", q.shards[i].queued, err)
		}
		n += int(c.Val())
	}
	if err != nil { // not a command's: the pipeline's
		return 0, fmt.Errorf("redisqueue: depth: %w", err)
	}
	return n, nil
}

// keepAlive resets the idle time of this Queue's unacked entries every
// VisibilityTimeout/3, one script per shard that holds any, so that no
// other node takes them over while this one is alive.
func (q *Queue) keepAlive() {
	defer q.wg.Done()
	every := q.vt / 3
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-q.done:
			return
		case <-t.C:
		}
		q.mu.Lock()
		ids := map[*shard][]any{}
		for ref := range q.held {
			s := q.shards[ref.shard]
			ids[s] = append(ids[s], ref.id)
		}
		q.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), every)
		for s, sent := range ids {
			args := append([]any{group, q.consumer}, sent...)
			kept, err := q.scripts.keepAlive.Run(ctx, q.client, []string{s.stream}, args...).StringSlice()
			if err != nil {
				q.log.Warn("redisqueue: keeping entries alive", "stream", s.stream, "entries", len(sent), "err", err)
				continue
			}
			q.dropLost(s, sent, kept)
		}
		cancel()
	}
}

// dropLost forgets the entries of s among sent that are not in kept:
// another consumer took them over (this process was paused past the
// visibility timeout) or they were acked meanwhile.
func (q *Queue) dropLost(s *shard, sent []any, kept []string) {
	ok := make(map[string]bool, len(kept))
	for _, id := range kept {
		ok[id] = true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, v := range sent {
		ref := entryRef{s.index, v.(string)}
		d, held := q.held[ref]
		if ok[ref.id] || !held {
			continue
		}
		delete(q.held, ref)
		q.log.Warn("redisqueue: an entry held here was taken over by another consumer", "instance", d.item.InstanceID, "stream", s.stream, "entry", ref.id)
	}
}

// Close stops the keep-alive and every waiting Pop and Push, and hands the
// entries read for Pops that had given up back to the queue, each at the
// head of its lane, where it was popped from. Deliveries
// handed out and not acked stay pending: another node takes them over after
// VisibilityTimeout. Closing twice does nothing.
func (q *Queue) Close() error {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return nil
	}
	q.closed = true
	close(q.done)
	q.mu.Unlock()
	q.wg.Wait()

	q.mu.Lock()
	stash := q.stash
	q.stash = nil
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	var errs []error
	for _, d := range stash {
		v, err := json.Marshal(d.item)
		if err == nil {
			keys, w := d.s.laneKeys(d.item)
			err = q.scripts.requeue.Run(ctx, q.client, keys,
				group, d.id, d.item.InstanceID, string(v), d.item.Key, w, wakeTokens).Err()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("redisqueue: handing instance %s (entry %s of %s) back: %w", d.item.InstanceID, d.id, d.s.stream, err))
			continue
		}
		q.forget(d.ref())
	}
	return errors.Join(errs...)
}

func (q *Queue) forget(ref entryRef) {
	q.mu.Lock()
	delete(q.held, ref)
	q.mu.Unlock()
}

// delivery is an entry handed out by Pop.
type delivery struct {
	q    *Queue
	s    *shard // whose stream holds the entry
	id   string // stream entry ID
	item queue.Item
	// marked: the coalescing bookkeeping is done. Only the goroutine that
	// has the delivery (a fetch, or Pop via the stash) touches it.
	marked bool
}

func (d *delivery) ref() entryRef { return entryRef{d.s.index, d.id} }

// Item implements queue.Delivery.
func (d *delivery) Item() queue.Item { return d.item }

// Ack implements queue.Delivery: it acknowledges and deletes the entry.
// Acking twice, or acking an entry another node took over, is harmless.
func (d *delivery) Ack(ctx context.Context) error {
	// Forget first, so that the keep-alive does not report the entry lost
	// while it is being acked; a failed Ack leaves it to the visibility
	// timeout, which is at-least-once.
	d.q.forget(d.ref())
	err := d.q.scripts.ack.Run(ctx, d.q.client, []string{d.s.stream, d.s.queued}, group, d.id, d.item.InstanceID).Err()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("redisqueue: acking instance %s (entry %s of %s): %w", d.item.InstanceID, d.id, d.s.stream, err)
	}
	return nil
}
