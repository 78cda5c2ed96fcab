package redisqueue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/weft"
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
	// looks for entries to take over, and looks at the lanes, at least
	// this often.
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
	// only at 2×Capacity (the package doc, "Backpressure"). Defaults to
	// 1024.
	Capacity int

	// VisibilityTimeout is how long an entry popped by a node that stopped
	// (crashed, or paused) stays with it before another node takes it
	// over. A live node keeps its entries however long it works on them.
	// At least 10ms. Defaults to 30s.
	VisibilityTimeout time.Duration

	// Prefix starts the Redis keys, inside a cluster hash tag; it must not
	// contain braces. Defaults to "weft:queue".
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
	capacity int
	share    int // queue.FairShare(capacity)
	vt       time.Duration
	log      *slog.Logger
	now      func() time.Time
	prefix   string // {prefix}: — the lanes, rings and weights follow it
	stream   string // {prefix}:ready
	queued   string // {prefix}:queued
	used     string // {prefix}:used
	wake     string // {prefix}:wake

	done chan struct{} // closed by Close
	wg   sync.WaitGroup

	mu          sync.Mutex
	closed      bool
	stash       []*delivery          // read for a Pop that had given up
	stashed     chan struct{}        // closed and replaced when an entry is stashed
	held        map[string]*delivery // by entry ID: handed out or stashed, not acked
	room        chan struct{}        // closed and replaced when an item is popped here
	nextReclaim time.Time            // when a Pop next looks for entries to take over
	reclaimFrom string               // XAUTOCLAIM cursor
	nextLook    time.Time            // when a waiting Pop next looks at the lanes unwoken
}

// New returns a Queue; it makes no call to Redis, so a node can start while
// Redis is down. The stream and groups are created on first use.
func New(cfg Config) (*Queue, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	prefix := "{" + cfg.Prefix + "}:"
	q := &Queue{
		client:      cfg.Client,
		consumer:    cfg.Consumer,
		capacity:    cfg.Capacity,
		share:       queue.FairShare(cfg.Capacity),
		vt:          cfg.VisibilityTimeout,
		log:         cfg.Logger.With("queue", cfg.Prefix, "consumer", cfg.Consumer),
		now:         cfg.Now,
		prefix:      prefix,
		stream:      prefix + "ready",
		queued:      prefix + "queued",
		used:        prefix + "used",
		wake:        prefix + "wake",
		done:        make(chan struct{}),
		held:        map[string]*delivery{},
		room:        make(chan struct{}),
		stashed:     make(chan struct{}),
		reclaimFrom: "0-0",
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

// laneKeys returns the keys of the lane, the ring and the weight hash that
// item goes to, after the queued hash and the stream, and before the wake
// stream: the KEYS of pushScript and requeueScript.
func (q *Queue) laneKeys(item queue.Item) (keys []string, weight int) {
	p, w := place(item)
	ps := strconv.Itoa(p)
	return []string{
		q.queued, q.stream,
		q.prefix + "lane:" + ps + ":" + item.Key,
		q.prefix + "ring:" + ps,
		q.prefix + "weight:" + ps,
		q.wake,
	}, w
}

// Push implements queue.Queue: it waits while queue.Admits refuses item
// (the package doc, "Backpressure"). It returns ctx.Err() when ctx ends
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
	keys, w := q.laneKeys(item)
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
		n, err := pushScript.Run(ctx, q.client, keys,
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

// Pop implements queue.Queue. It returns a delivery, ctx.Err() when ctx
// ends first, or queue.ErrClosed after Close; Redis errors are logged and
// retried.
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
		go q.fetch(first, deadline, hasDeadline, got, abandon)
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
// bookkeeping failed), marks it popped, and hands it over on got, or stashes
// it when the Pop has given up (abandon closed) by then. It stops reading
// when abandon or q.done is closed.
func (q *Queue) fetch(d *delivery, deadline time.Time, hasDeadline bool, got chan<- *delivery, abandon <-chan struct{}) {
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
			d, err = q.read(look, deadline, hasDeadline)
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
// next item in the fair order, or nil when none came within one wait
// window. It pops before waiting when look is set (a Pop's first read) or
// when this Queue's periodic look is due, which finds what no wake token
// announced (a token lost with a connection, an item pushed by a node of
// the old version); otherwise it waits for a wake token first.
func (q *Queue) read(look bool, deadline time.Time, hasDeadline bool) (*delivery, error) {
	if d, err := q.reclaim(); d != nil || err != nil {
		return d, err
	}
	if look || q.lookDue() {
		if d, err := q.popNext(); d != nil || err != nil {
			return d, err
		}
	}
	block := min(blockMax, q.vt/4)
	if hasDeadline {
		block = min(block, time.Until(deadline))
	}
	woke, err := q.waitWake(max(block, time.Millisecond))
	if err != nil || !woke {
		return nil, err
	}
	return q.popNext()
}

// lookDue reports whether it is time for a waiting Pop of this Queue to
// look at the lanes without a wake token, once per wait window.
func (q *Queue) lookDue() bool {
	now := q.now()
	q.mu.Lock()
	defer q.mu.Unlock()
	if now.Before(q.nextLook) {
		return false
	}
	q.nextLook = now.Add(min(blockMax, q.vt/4))
	return true
}

// waitWake waits up to block for a wake token (a push's, or a hand-back's)
// and reports whether one came.
func (q *Queue) waitWake(block time.Duration) (bool, error) {
	// Not the Pop's ctx: a cancelled read loses its connection, and the
	// token Redis may have handed it. The window bounds the call instead,
	// and the Pop does not wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), block+callTimeout)
	defer cancel()
	res, err := q.client.XReadGroup(ctx, &redis.XReadGroupArgs{
		Group:    waiters,
		Consumer: q.consumer,
		Streams:  []string{q.wake, ">"},
		Count:    1,
		Block:    block,
		NoAck:    true,
	}).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return false, nil
	case isNoGroup(err):
		return false, q.ensureGroups(ctx)
	case err != nil:
		return false, fmt.Errorf("waiting on %s: %w", q.wake, err)
	}
	return len(res) > 0 && len(res[0].Messages) > 0, nil
}

// popNext pops the next item in the fair order with popScript (or an
// undelivered old-version entry of the stream), or returns nil when
// nothing is queued. It drops malformed entries and pops again.
func (q *Queue) popNext() (*delivery, error) {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	created := false
	for {
		res, err := popScript.Run(ctx, q.client, []string{q.stream, q.queued, q.used},
			group, q.consumer, q.prefix, weft.LowestPriority).Slice()
		if errors.Is(err, redis.Nil) {
			return nil, nil
		}
		if isNoGroup(err) && !created {
			if err := q.ensureGroups(ctx); err != nil {
				return nil, err
			}
			created = true
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("popping from %s: %w", q.queued, err)
		}
		m, err := message(res)
		if err != nil {
			return nil, fmt.Errorf("popping from %s: %w", q.queued, err)
		}
		if d := q.entry(ctx, m); d != nil {
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

// reclaim takes over one entry idle for longer than the visibility timeout,
// if it is time to look. After a success it looks again at once, so that a
// dead node's entries move as fast as they are popped.
func (q *Queue) reclaim() (*delivery, error) {
	now := q.now()
	q.mu.Lock()
	if now.Before(q.nextReclaim) {
		q.mu.Unlock()
		return nil, nil
	}
	q.nextReclaim = now.Add(q.vt / 4)
	from := q.reclaimFrom
	q.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	msgs, next, err := q.client.XAutoClaim(ctx, &redis.XAutoClaimArgs{
		Stream:   q.stream,
		Group:    group,
		Consumer: q.consumer,
		MinIdle:  q.vt,
		Start:    from,
		Count:    1,
	}).Result()
	if isNoGroup(err) {
		return nil, q.ensureGroups(ctx)
	}
	if err != nil {
		return nil, fmt.Errorf("taking over idle entries of %s: %w", q.stream, err)
	}
	q.mu.Lock()
	q.reclaimFrom = next
	if len(msgs) > 0 || next != "0-0" {
		q.nextReclaim = now // more may be waiting
	}
	q.mu.Unlock()
	if len(msgs) == 0 { // Count is 1
		return nil, nil
	}
	d := q.entry(ctx, msgs[0])
	if d != nil {
		q.log.Info("redisqueue: took over an entry from a stopped consumer", "instance", d.item.InstanceID, "entry", d.id)
	}
	return d, nil
}

// entry turns a stream message into a delivery held by this Queue, or
// acknowledges and drops a malformed one (it cannot be run, and left
// pending it would be redelivered forever). An entry that popScript added
// carries its item, whose bookkeeping is done (marked); one of the old
// version carries the instance and the reason, and its bookkeeping may
// not be.
func (q *Queue) entry(ctx context.Context, m redis.XMessage) *delivery {
	inst, _ := m.Values["instance"].(string)
	if inst == "" {
		q.log.Error("redisqueue: dropping a malformed entry (no instance field)", "stream", q.stream, "entry", m.ID, "values", m.Values)
		if err := ackScript.Run(ctx, q.client, []string{q.stream, q.queued}, group, m.ID, "").Err(); err != nil {
			q.log.Warn("redisqueue: acknowledging a malformed entry", "entry", m.ID, "err", err)
		}
		return nil
	}
	d := &delivery{q: q, id: m.ID}
	if v, ok := m.Values["item"].(string); ok {
		d.marked = true
		if err := json.Unmarshal([]byte(v), &d.item); err != nil {
			// The instance has work in the store whatever its order was.
			q.log.Warn("redisqueue: an entry's item is unreadable; delivering its instance alone", "instance", inst, "entry", m.ID, "err", err)
			d.item = queue.Item{}
		}
	} else {
		d.item.Reason, _ = m.Values["reason"].(string)
	}
	d.item.InstanceID = inst
	q.mu.Lock()
	q.held[m.ID] = d
	q.mu.Unlock()
	return d
}

// popped does the coalescing bookkeeping of an old-version entry taken
// over from a consumer that may have died before doing it: from now on a
// Push for its instance queues a new item.
func (q *Queue) popped(d *delivery) error {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if err := poppedScript.Run(ctx, q.client, []string{q.queued}, d.item.InstanceID, d.id).Err(); err != nil {
		return fmt.Errorf("marking instance %s (entry %s) popped: %w", d.item.InstanceID, d.id, err)
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

// ensureGroups creates the stream's consumer group and the wake stream's,
// each at ID 0 (so that entries and tokens added before the first read
// count) unless it exists.
func (q *Queue) ensureGroups(ctx context.Context) error {
	for _, g := range [...]struct{ stream, group string }{{q.stream, group}, {q.wake, waiters}} {
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

// Depth implements queue.Queue: the number of queued items not yet popped.
func (q *Queue) Depth(ctx context.Context) (int, error) {
	n, err := q.client.HLen(ctx, q.queued).Result()
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		return 0, fmt.Errorf("redisqueue: depth of %s: %w", q.queued, err)
	}
	return int(n), nil
}

// keepAlive resets the idle time of this Queue's unacked entries every
// VisibilityTimeout/3, so that no other node takes them over while this one
// is alive.
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
		ids := make([]any, 0, 2+len(q.held))
		ids = append(ids, group, q.consumer)
		for id := range q.held {
			ids = append(ids, id)
		}
		q.mu.Unlock()
		if len(ids) == 2 {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), every)
		kept, err := keepAliveScript.Run(ctx, q.client, []string{q.stream}, ids...).StringSlice()
		cancel()
		if err != nil {
			q.log.Warn("redisqueue: keeping entries alive", "entries", len(ids)-2, "err", err)
			continue
		}
		q.dropLost(ids[2:], kept)
	}
}

// dropLost forgets the entries among sent that are not in kept: another
// consumer took them over (this process was paused past the visibility
// timeout) or they were acked meanwhile.
func (q *Queue) dropLost(sent []any, kept []string) {
	ok := make(map[string]bool, len(kept))
	for _, id := range kept {
		ok[id] = true
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for _, s := range sent {
		id := s.(string)
		d, held := q.held[id]
		if ok[id] || !held {
			continue
		}
		delete(q.held, id)
		q.log.Warn("redisqueue: an entry held here was taken over by another consumer", "instance", d.item.InstanceID, "entry", id)
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
			keys, w := q.laneKeys(d.item)
			err = requeueScript.Run(ctx, q.client, keys,
				group, d.id, d.item.InstanceID, string(v), d.item.Key, w, wakeTokens).Err()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("redisqueue: handing instance %s (entry %s) back: %w", d.item.InstanceID, d.id, err))
			continue
		}
		q.forget(d.id)
	}
	return errors.Join(errs...)
}

func (q *Queue) forget(id string) {
	q.mu.Lock()
	delete(q.held, id)
	q.mu.Unlock()
}

// delivery is an entry handed out by Pop.
type delivery struct {
	q    *Queue
	id   string // stream entry ID
	item queue.Item
	// marked: the coalescing bookkeeping is done. Only the goroutine that
	// has the delivery (a fetch, or Pop via the stash) touches it.
	marked bool
}

// Item implements queue.Delivery.
func (d *delivery) Item() queue.Item { return d.item }

// Ack implements queue.Delivery: it acknowledges and deletes the entry.
// Acking twice, or acking an entry another node took over, is harmless.
func (d *delivery) Ack(ctx context.Context) error {
	// Forget first, so that the keep-alive does not report the entry lost
	// while it is being acked; a failed Ack leaves it to the visibility
	// timeout, which is at-least-once.
	d.q.forget(d.id)
	err := ackScript.Run(ctx, d.q.client, []string{d.q.stream, d.q.queued}, group, d.id, d.item.InstanceID).Err()
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("redisqueue: acking instance %s (entry %s): %w", d.item.InstanceID, d.id, err)
	}
	return nil
}
