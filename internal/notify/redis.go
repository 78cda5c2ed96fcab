package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/partition"
)

const (
	// healthEvery is how long a receiving connection may stay silent
	// before it is pinged; a ping unanswered for as long again replaces the
	// connection (a paused or unreachable server gives no error).
	healthEvery = time.Second
	// retryMax bounds the backoff between attempts to reach Redis.
	retryMax = time.Second
	// confirmEvery is how often Subscribe repeats its confirmation ping
	// while a connection is being replaced.
	confirmEvery = time.Second
	// callTimeout bounds calls made on the bus's own behalf.
	callTimeout = 5 * time.Second
	// receivedMax bounds the notifications received and not yet handed to
	// the subscribers' functions; past it the receivers wait, but while a
	// Subscribe waits for their answer (receiver.pass).
	receivedMax = 1024
)

// RedisConfig configures a Redis bus. Client is required; NewRedis fills
// every other unset field.
type RedisConfig struct {
	// Client is the Redis connection (a client, a failover client or a
	// cluster client). The bus holds connections of its own for
	// receiving: one, and with shards one more on a plain client or one
	// per shard on a cluster client. Required.
	Client redis.UniversalClient

	// Prefix starts every channel name: the channel of a topic is Prefix +
	// topic, and the shards' channels are in hash tags that start with it
	// (see Shards). With Shards above 1 it must not contain '{' or '}'.
	// Defaults to "weft:notify:".
	Prefix string

	// Shards is the number of shards of the Sharded topics. Above 1, a
	// notification of such a topic goes with SPUBLISH (Redis 7) to the
	// channel of its shard, partition.Of(payload, Shards), named
	// "{" + Prefix + "Q~S}:" + topic with the shard's hash tag
	// (partition.Tags(Prefix, Shards)[Q]), and every bus subscribes to
	// every shard's channel with SSUBSCRIBE. A Redis Cluster delivers a
	// shard's message within the master and replicas of the shard's slot,
	// where it broadcasts a classic PUBLISH to every node over the
	// cluster bus, at a cost that grows with the cluster. From 1 to
	// partition.Max. Defaults to 1: every topic on classic
	// PUBLISH/SUBSCRIBE, on the channel Prefix + topic.
	Shards int

	// Sharded names the topics that go sharded when Shards is above 1:
	// those whose payload is an instance id, so that a notification
	// concerns one partition (the engine's "inbox" and "changed"). The
	// other topics, catalog-wide notices such as a plugin's upload, stay
	// on classic pub/sub, which reaches every node of a cluster. Every
	// node of a deployment must be given the same Prefix, Shards and
	// Sharded. Defaults to none.
	Sharded []string

	// Logger receives the bus's logs: losing and regaining Redis.
	// Defaults to slog.Default().
	Logger *slog.Logger
}

// WithDefaults returns a copy of c with every unset optional field set to
// its default.
func (c RedisConfig) WithDefaults() RedisConfig {
	if c.Prefix == "" {
		c.Prefix = "weft:notify:"
	}
	if c.Shards == 0 {
		c.Shards = 1
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// layout checks c (with its defaults) and returns where its bus sends
// each topic.
func (c RedisConfig) layout() (layout, error) {
	l := layout{prefix: c.Prefix}
	if c.Client == nil {
		return l, errors.New("notify: RedisConfig.Client is required")
	}
	if c.Shards < 1 || c.Shards > partition.Max {
		return l, fmt.Errorf("notify: RedisConfig.Shards is %d: want 1 to %d", c.Shards, partition.Max)
	}
	for _, topic := range c.Sharded {
		if err := checkTopic("RedisConfig.Sharded", topic); err != nil {
			return l, err
		}
	}
	if c.Shards == 1 {
		return l, nil
	}
	tags, err := partition.Tags(c.Prefix, c.Shards)
	if err != nil {
		return l, fmt.Errorf("notify: RedisConfig.Prefix with %d shards: %w", c.Shards, err)
	}
	l.tags, l.sharded = tags, map[string]bool{}
	for _, topic := range c.Sharded {
		l.sharded[topic] = true
	}
	return l, nil
}

// Redis is the bus of cluster mode, over Redis pub/sub. It is safe for
// concurrent use. Close it when done: it runs goroutines.
//
// # Notes
//
//   - The topics that are not sharded share one receiving connection, on
//     plain PUBLISH/SUBSCRIBE, which Redis Cluster broadcasts to every
//     node, so their channels need no hash tag. With Shards above 1, the
//     sharded topics are received on one more connection (a plain client)
//     or on one per shard (a cluster client: each follows its shard's
//     slot); a shard's connection is opened with the first subscription
//     of a sharded topic and closed with the last.
//   - When a connection breaks (a Redis restart, a master's failover),
//     the bus reconnects with a backoff of up to 1s and subscribes again
//     to every channel that has subscribers; a silent connection is
//     pinged every second and replaced when the ping goes unanswered; a
//     shard's subscription that Redis refuses or ends because another
//     node serves its slot now is made again where the slot map says,
//     once a cluster client has read it again. What was published
//     meanwhile is lost (see the package doc): after a master's failover,
//     its shards' notifications arrive again within about a second of the
//     promotion (0.1–0.9s measured by TestRedisCluster).
//   - A connection is dialled under its own receiver's lock, never under
//     the lock that the receivers and the dispatcher share: a shard whose
//     node does not answer delays its own notifications alone, and the
//     Subscribes that must be confirmed there
//     (TestRedisClusterPausedMasterHoldsUpNoOtherShard).
type Redis struct {
	client  redis.UniversalClient
	cluster *redis.ClusterClient // client, when it is a cluster client
	layout  layout
	log     *slog.Logger

	mu      sync.Mutex
	subs    subscribers
	classic *receiver         // the topics that are not sharded
	shards  map[int]*receiver // the sharded topics, by group (see group)
	pongs   map[string]pong   // confirmation pings in flight, by payload
	nonce   uint64

	closed   atomic.Bool   // set under mu, read without it by Publish
	done     chan struct{} // closed by Close
	received chan delivery // from the receivers to deliver
	running  sync.WaitGroup
}

// NewRedis returns a Redis bus. It makes no call to Redis: the receiving
// connection is dialled by the bus's goroutine, so a node can start while
// Redis is down.
//
// # Errors
//
// It fails without a Client, with Shards out of range, with an empty topic
// in Sharded, and with Shards above 1 and a Prefix that contains a brace.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	return newRedis(cfg, receivedMax)
}

// newRedis is NewRedis with a buffer of buffered notifications between
// the receivers and the dispatcher: receivedMax, or what a test needs.
func newRedis(cfg RedisConfig, buffered int) (*Redis, error) {
	cfg = cfg.WithDefaults()
	l, err := cfg.layout()
	if err != nil {
		return nil, err
	}
	r := &Redis{
		client:   cfg.Client,
		layout:   l,
		log:      cfg.Logger.With("bus", cfg.Prefix),
		shards:   map[int]*receiver{},
		pongs:    map[string]pong{},
		done:     make(chan struct{}),
		received: make(chan delivery, buffered),
	}
	r.cluster, _ = cfg.Client.(*redis.ClusterClient)
	r.classic = r.start("classic", false, r.client.Subscribe(context.Background()), nil)
	r.running.Add(1)
	go r.deliver()
	return r, nil
}

// start returns a receiver of channels on ps and starts its goroutine.
// With ps nil, the receiver's connection is opened by the first sync, of
// the Subscribe that made it or of its goroutine. The caller holds mu, or
// is NewRedis.
func (r *Redis) start(name string, sharded bool, ps *redis.PubSub, channels []string) *receiver {
	rc := &receiver{
		name: name, sharded: sharded, ps: ps, channels: map[string]struct{}{},
		wake: make(chan struct{}, 1), stop: make(chan struct{}),
	}
	for _, ch := range channels {
		rc.channels[ch] = struct{}{}
	}
	r.running.Add(1)
	go r.receive(rc)
	return rc
}

// group returns the receiver group of shard q: the shard itself on a
// cluster client, whose receivers each follow one slot, and 0 (one
// receiver for every shard) on another client, where nothing has slots.
func (r *Redis) group(q int) int {
	if r.cluster != nil {
		return q
	}
	return 0
}

// Publish sends payload to the subscribers of topic on every node that is
// connected now: with SPUBLISH to the channel of the payload's shard for a
// sharded topic, with PUBLISH otherwise. It returns once Redis has
// accepted it, ctx.Err() when ctx ends first, and an error naming the
// topic when Redis fails.
func (r *Redis) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := checkTopic("publish", topic); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if r.closed.Load() {
		return ErrClosed
	}
	var (
		err   error
		where = topic
	)
	if r.layout.isSharded(topic) {
		q := r.layout.shardOf(payload)
		where = topic + " (shard " + strconv.Itoa(q) + ")"
		err = r.client.SPublish(ctx, r.layout.shardChannel(q, topic), payload).Err()
	} else {
		err = r.client.Publish(ctx, r.layout.classicChannel(topic), payload).Err()
	}
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("notify: publishing on %s: %w", where, err)
	}
	return nil
}

// Subscribe calls fn with every payload published on topic once Subscribe
// has returned, until unsubscribe is called. It returns when Redis has
// confirmed the subscription (for a sharded topic, on every shard),
// waiting through reconnections, or ctx.Err() when ctx ends first (nothing
// stays subscribed then). Unsubscribing twice is harmless.
func (r *Redis) Subscribe(ctx context.Context, topic string, fn func(payload []byte)) (unsubscribe func(), err error) {
	if err := checkTopic("subscribe", topic); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	id, first := r.subs.add(topic, fn)
	if first {
		r.listen(topic)
	}
	receivers := r.receiversOf(topic)
	r.mu.Unlock()
	unsubscribe = func() { r.unsubscribe(topic, id) }
	// Written by now: this Subscribe's subscriptions, and those of every
	// Subscribe before it, which this one's confirmation must not pass.
	for _, rc := range receivers {
		r.sync(rc, false)
	}
	if err := r.confirm(ctx, receivers); err != nil {
		unsubscribe()
		return nil, err
	}
	return unsubscribe, nil
}

// listen records topic's channels with their receivers, starting the
// shards' receivers that do not run yet, for sync to subscribe to them
// (outside mu: it may dial). A channel stays recorded when the write
// fails, and is subscribed to again with the next connection. The caller
// holds mu.
func (r *Redis) listen(topic string) {
	if !r.layout.isSharded(topic) {
		r.classic.record(true, []string{r.layout.classicChannel(topic)})
		return
	}
	for g, channels := range r.shardChannels(topic) {
		if rc := r.shards[g]; rc != nil {
			rc.record(true, channels)
			continue
		}
		name := "shards"
		if r.cluster != nil {
			name = "shard " + strconv.Itoa(g)
		}
		r.shards[g] = r.start(name, true, nil, channels)
	}
}

// shardChannels returns topic's channel in every shard, by receiver group.
func (r *Redis) shardChannels(topic string) map[int][]string {
	out := map[int][]string{}
	for q := range r.layout.tags {
		g := r.group(q)
		out[g] = append(out[g], r.layout.shardChannel(q, topic))
	}
	return out
}

// receiversOf returns the receivers of topic's channels. The caller holds
// mu.
func (r *Redis) receiversOf(topic string) []*receiver {
	if !r.layout.isSharded(topic) {
		return []*receiver{r.classic}
	}
	var out []*receiver
	for g := range r.shardChannels(topic) {
		if rc := r.shards[g]; rc != nil {
			out = append(out, rc)
		}
	}
	return out
}

// pong is a confirmation ping in flight: which receiver it was sent on,
// for which Subscribe.
type pong struct {
	rc *receiver
	c  *confirmation
}

// confirmation is a Subscribe waiting for each of its receivers to answer
// a ping.
type confirmation struct {
	left map[*receiver]struct{} // guarded by Redis.mu
	done chan struct{}          // closed when left is empty
}

// answer records that rc answered. The caller holds mu.
func (p pong) answer(rc *receiver) {
	if _, ok := p.c.left[rc]; !ok {
		return
	}
	delete(p.c.left, rc)
	rc.confirming--
	if len(p.c.left) == 0 {
		close(p.c.done)
	}
}

// confirm returns once everything sent on the receivers' connections before
// it was called has been processed by Redis: it sends a PING with a fresh
// payload on each and waits for the answers, again every second on those
// that have not answered, since a ping sent on a connection that then
// broke is never answered (and a new connection subscribes to every
// channel before any ping). A connection that Redis answers with an error
// (a refused SSUBSCRIBE) is replaced before its later answers are read, so
// the answer to a ping is the confirmation of what came before it. While
// it waits, the receivers read on past a full dispatcher's buffer (pass).
func (r *Redis) confirm(ctx context.Context, receivers []*receiver) error {
	c := &confirmation{left: map[*receiver]struct{}{}, done: make(chan struct{})}
	r.mu.Lock()
	for _, rc := range receivers {
		if _, ok := c.left[rc]; ok {
			continue
		}
		c.left[rc] = struct{}{}
		rc.confirming++
		select {
		case rc.wake <- struct{}{}:
		default: // a wake is pending already
		}
	}
	r.mu.Unlock()
	if len(c.left) == 0 {
		return nil
	}
	var sent []string
	defer func() {
		r.mu.Lock()
		for _, p := range sent {
			delete(r.pongs, p)
		}
		for rc := range c.left {
			rc.confirming--
		}
		clear(c.left)
		r.mu.Unlock()
	}()
	t := time.NewTicker(confirmEvery)
	defer t.Stop()
	type ping struct {
		ps      *redis.PubSub
		payload string
	}
	for {
		r.mu.Lock()
		if r.closed.Load() {
			r.mu.Unlock()
			return ErrClosed
		}
		pings := make([]ping, 0, len(c.left))
		for rc := range c.left {
			if rc.ps == nil {
				continue // not opened (its Subscribe stopped it): pinged at the next tick
			}
			r.nonce++
			payload := "confirm-" + strconv.FormatUint(r.nonce, 10)
			r.pongs[payload] = pong{rc, c}
			sent = append(sent, payload)
			pings = append(pings, ping{rc.ps, payload})
		}
		r.mu.Unlock()
		for _, p := range pings {
			_ = p.ps.Ping(ctx, p.payload) // a failed write is retried at the next tick
		}
		select {
		case <-c.done:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			return ErrClosed
		case <-t.C:
		}
	}
}

// unsubscribe drops subscription id of topic and, with the topic's last
// one, its channels: a receiver left with none is stopped and its
// connection closed, and the others unsubscribe (sync). A channel is
// forgotten even when the write fails, so the next connection does not
// subscribe to it; messages that still arrive find no subscriber.
func (r *Redis) unsubscribe(topic string, id uint64) {
	r.mu.Lock()
	if !r.subs.remove(topic, id) || r.closed.Load() {
		r.mu.Unlock()
		return
	}
	var (
		changed []*receiver
		dropped []*redis.PubSub
	)
	if !r.layout.isSharded(topic) {
		r.classic.record(false, []string{r.layout.classicChannel(topic)})
		changed = append(changed, r.classic)
	} else {
		for g, channels := range r.shardChannels(topic) {
			rc := r.shards[g]
			if rc == nil {
				continue
			}
			rc.record(false, channels)
			if len(rc.channels) > 0 {
				changed = append(changed, rc)
				continue
			}
			// Its goroutine ends on its own; Close waits for it. A
			// connection that a sync opens from now on is closed by it.
			delete(r.shards, g)
			close(rc.stop)
			if rc.ps != nil {
				dropped = append(dropped, rc.ps)
			}
		}
	}
	r.mu.Unlock()
	for _, ps := range dropped {
		_ = ps.Close() // may wait for a dial in progress on it: outside mu
	}
	for _, rc := range changed {
		r.sync(rc, false)
	}
}

// Close stops the bus and closes its connections. Closing twice does
// nothing.
func (r *Redis) Close() error {
	r.mu.Lock()
	if r.closed.Load() {
		r.mu.Unlock()
		return nil
	}
	r.closed.Store(true)
	close(r.done)
	// No receiver replaces its connection once closed is set.
	receivers := []*receiver{r.classic}
	for _, rc := range r.shards {
		receivers = append(receivers, rc)
	}
	conns := make([]*redis.PubSub, len(receivers))
	for i, rc := range receivers {
		conns[i] = rc.ps
	}
	r.mu.Unlock()
	var errs []error
	for i, ps := range conns {
		if ps == nil {
			continue // never opened; a sync opening it now closes it
		}
		// Ends a receive in progress.
		if err := ps.Close(); err != nil && !errors.Is(err, redis.ErrClosed) {
			errs = append(errs, fmt.Errorf("notify: closing the %s receiving connection: %w", receivers[i].name, err))
		}
	}
	r.running.Wait()
	return errors.Join(errs...)
}
