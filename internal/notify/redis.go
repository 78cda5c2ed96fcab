package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// healthEvery is how long the receiving connection may stay silent
	// before it is pinged; a ping unanswered for as long again replaces the
	// connection (a paused or unreachable server gives no error).
	healthEvery = time.Second
	// retryMax bounds the backoff between attempts to reach Redis.
	retryMax = time.Second
	// confirmEvery is how often Subscribe repeats its confirmation ping
	// while the connection is being replaced.
	confirmEvery = time.Second
	// callTimeout bounds calls made on the bus's own behalf.
	callTimeout = 5 * time.Second
)

// RedisConfig configures a Redis bus. Client is required; NewRedis fills
// every other unset field.
type RedisConfig struct {
	// Client is the Redis connection (a client, a failover client or a
	// cluster client). The bus holds one connection of its own for
	// receiving. Required.
	Client redis.UniversalClient

	// Prefix starts every channel name: the channel of a topic is Prefix +
	// topic. Defaults to "weft:notify:".
	Prefix string

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
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// Redis is the bus of cluster mode, over Redis pub/sub. It is safe for
// concurrent use. Close it when done: it runs a goroutine.
//
// # Notes
//
//   - One connection receives for every topic. When it breaks (a Redis
//     restart), the bus reconnects with a backoff of up to 1s and
//     subscribes again to every topic that has subscribers; a silent
//     connection is pinged every second and replaced when the ping goes
//     unanswered. What was published meanwhile is lost (see the package
//     doc).
//   - Plain PUBLISH/SUBSCRIBE, which Redis Cluster broadcasts to every
//     node, so channels need no hash tag.
type Redis struct {
	client redis.UniversalClient
	prefix string
	log    *slog.Logger

	mu     sync.Mutex
	subs   subscribers
	ps     *redis.PubSub              // the receiving connection; replaced when silent
	pongs  map[string]chan<- struct{} // confirmation pings in flight, by payload
	nonce  uint64
	closed bool

	done    chan struct{}
	stopped chan struct{}
}

// NewRedis returns a Redis bus. It makes no call to Redis: the receiving
// connection is dialled by the bus's goroutine, so a node can start while
// Redis is down.
func NewRedis(cfg RedisConfig) (*Redis, error) {
	cfg = cfg.WithDefaults()
	if cfg.Client == nil {
		return nil, errors.New("notify: RedisConfig.Client is required")
	}
	r := &Redis{
		client:  cfg.Client,
		prefix:  cfg.Prefix,
		log:     cfg.Logger.With("bus", cfg.Prefix),
		pongs:   map[string]chan<- struct{}{},
		done:    make(chan struct{}),
		stopped: make(chan struct{}),
	}
	r.ps = r.client.Subscribe(context.Background())
	go r.run()
	return r, nil
}

// Publish sends payload to the subscribers of topic on every node that is
// connected now. It returns once Redis has accepted it, ctx.Err() when ctx
// ends first, and an error naming the topic when Redis fails.
func (r *Redis) Publish(ctx context.Context, topic string, payload []byte) error {
	if err := checkTopic("publish", topic); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if err := r.client.Publish(ctx, r.prefix+topic, payload).Err(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("notify: publishing on %s: %w", topic, err)
	}
	return nil
}

// Subscribe calls fn with every payload published on topic once Subscribe
// has returned, until unsubscribe is called. It returns when Redis has
// confirmed the subscription, waiting through reconnections, or ctx.Err()
// when ctx ends first (nothing stays subscribed then). Unsubscribing twice
// is harmless.
func (r *Redis) Subscribe(ctx context.Context, topic string, fn func(payload []byte)) (unsubscribe func(), err error) {
	if err := checkTopic("subscribe", topic); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrClosed
	}
	id, first := r.subs.add(topic, fn)
	if first {
		// The channel is recorded even when the write fails, and is
		// subscribed again with the next connection.
		_ = r.ps.Subscribe(ctx, r.prefix+topic)
	}
	r.mu.Unlock()
	unsubscribe = func() { r.unsubscribe(topic, id) }
	if err := r.confirm(ctx); err != nil {
		unsubscribe()
		return nil, err
	}
	return unsubscribe, nil
}

// confirm returns once everything sent on the receiving connection before
// it was called has been processed by Redis: it sends a PING with a fresh
// payload there and waits for the answer, again every second, since a ping
// sent on a connection that then broke is never answered (and a new
// connection subscribes to every channel before any ping).
func (r *Redis) confirm(ctx context.Context) error {
	answered := make(chan struct{}, 1)
	var sent []string
	defer func() {
		r.mu.Lock()
		for _, p := range sent {
			delete(r.pongs, p)
		}
		r.mu.Unlock()
	}()
	t := time.NewTicker(confirmEvery)
	defer t.Stop()
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return ErrClosed
		}
		r.nonce++
		payload := "confirm-" + strconv.FormatUint(r.nonce, 10)
		r.pongs[payload] = answered
		sent = append(sent, payload)
		ps := r.ps
		r.mu.Unlock()
		_ = ps.Ping(ctx, payload) // a failed write is retried at the next tick
		select {
		case <-answered:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-r.done:
			return ErrClosed
		case <-t.C:
		}
	}
}

func (r *Redis) unsubscribe(topic string, id uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.subs.remove(topic, id) || r.closed {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	// The channel is forgotten even when the write fails, so the next
	// connection does not subscribe to it; messages that still arrive
	// find no subscriber.
	if err := r.ps.Unsubscribe(ctx, r.prefix+topic); err != nil {
		r.log.Debug("notify: unsubscribing", "topic", topic, "err", err)
	}
}

// Close stops the bus and closes its connection. Closing twice does
// nothing.
func (r *Redis) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	close(r.done)
	ps := r.ps
	r.mu.Unlock()
	err := ps.Close() // ends a Receive in progress
	<-r.stopped
	if err != nil && !errors.Is(err, redis.ErrClosed) {
		return fmt.Errorf("notify: closing the receiving connection: %w", err)
	}
	return nil
}

// run receives on the bus's connection and dispatches until Close.
func (r *Redis) run() {
	defer close(r.stopped)
	var (
		backoff  time.Duration
		pinged   bool // a health ping is unanswered
		down     bool // the last receive failed
		stopping = func() bool {
			select {
			case <-r.done:
				return true
			default:
				return false
			}
		}
	)
	for !stopping() {
		r.mu.Lock()
		ps := r.ps
		r.mu.Unlock()
		msg, err := ps.ReceiveTimeout(context.Background(), healthEvery)
		if stopping() {
			return
		}
		var nerr net.Error
		switch {
		case err == nil:
			pinged, backoff = false, 0
			if down {
				down = false
				r.log.Info("notify: receiving again")
			}
			r.handle(msg)
		case errors.As(err, &nerr) && nerr.Timeout():
			if !pinged {
				pinged = true
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				_ = ps.Ping(ctx, "health")
				cancel()
				continue
			}
			r.log.Warn("notify: the receiving connection is silent; replacing it")
			r.replace()
			pinged = false
		default:
			if !down {
				down = true
				r.log.Warn("notify: receiving failed; reconnecting", "err", err)
			}
			backoff = min(max(2*backoff, 50*time.Millisecond), retryMax)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-r.done:
			}
			t.Stop()
		}
	}
}

// replace closes the receiving connection and opens another one that
// subscribes to every topic with subscribers.
func (r *Redis) replace() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	old := r.ps
	r.ps = r.client.Subscribe(context.Background())
	if len(r.subs.topics) > 0 {
		channels := make([]string, 0, len(r.subs.topics))
		for topic := range r.subs.topics {
			channels = append(channels, r.prefix+topic)
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_ = r.ps.Subscribe(ctx, channels...) // recorded even when it fails; the next connection subscribes
		cancel()
	}
	_ = old.Close()
}

// handle acts on one received message: a notification, a confirmation
// ping's answer, or a subscription reply.
func (r *Redis) handle(msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		topic, ok := strings.CutPrefix(m.Channel, r.prefix)
		if ok {
			dispatch(&r.mu, &r.subs, topic, []byte(m.Payload))
		}
	case *redis.Pong:
		r.mu.Lock()
		if ch, ok := r.pongs[m.Payload]; ok {
			delete(r.pongs, m.Payload)
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		r.mu.Unlock()
	}
}
