package notify

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// receiver is one receiving connection of a Redis bus (a go-redis PubSub)
// and the goroutine that reads it: the classic one, which carries the
// topics that are not sharded, or one of the sharded ones.
//
// go-redis binds a cluster client's PubSub to the node that serves the
// slot of its first channel when it dials (on the first subscribe and on
// every reconnection), and sends every channel's SSUBSCRIBE there in one
// command, which a cluster refuses (CROSSSLOT) unless the channels share a
// slot. A sharded receiver of a cluster client therefore carries the
// channels of one shard: one slot, whose master (or one of its replicas,
// which Redis 7 also lets serve the shard's subscribers) it follows. On
// any other client there are no slots, and one sharded receiver carries
// every shard.
//
// Any call on a PubSub may dial: its first subscription, and any call
// after its connection broke and could not be made again. Such calls are
// made under the receiver's own lock (calls), never under Redis.mu, so
// that a node that is slow to answer or unreachable holds up the calls on
// its own connection alone, and neither the other receivers nor the
// dispatcher.
type receiver struct {
	name    string // in logs: "classic", "shard 3", "shards"
	sharded bool   // SSUBSCRIBE; else SUBSCRIBE

	// calls serializes what is written on the connection on the bus's
	// behalf (sync): its opening, its replacement and the subscription
	// changes. Redis.mu may be taken under it, never the reverse.
	calls sync.Mutex

	// Guarded by Redis.mu.
	ps         *redis.PubSub       // nil until opened; replaced when silent or refused
	channels   map[string]struct{} // what ps must be subscribed to
	changes    []change            // made to channels and not yet written on ps
	confirming int                 // confirmations waiting for this receiver's answer

	wake chan struct{} // (1) a confirmation began: see pass
	stop chan struct{} // closed when the bus drops it (its last channel went)

	// backlog holds the notifications read and not yet handed to the
	// dispatcher, in order. Only the receiver's goroutine touches it.
	backlog []delivery
}

// change is a subscription change of a receiver's channels, to write on
// its connection.
type change struct {
	subscribe bool // else unsubscribe
	channels  []string
}

// stopped reports whether the bus or the receiver was stopped.
func (rc *receiver) stopped(done <-chan struct{}) bool {
	select {
	case <-done:
		return true
	case <-rc.stop:
		return true
	default:
		return false
	}
}

// record changes rc's channels and queues the change for sync to write.
// The caller holds Redis.mu.
func (rc *receiver) record(subscribe bool, channels []string) {
	for _, ch := range channels {
		if subscribe {
			rc.channels[ch] = struct{}{}
		} else {
			delete(rc.channels, ch)
		}
	}
	rc.changes = append(rc.changes, change{subscribe, slices.Clone(channels)})
}

// delivery is a notification on its way from a receiver to the
// dispatcher.
type delivery struct {
	topic   string
	payload string
}

// receive reads rc's connection and hands what it gets to handle, until
// the bus closes or drops rc. It keeps the connection healthy: a silent
// one is pinged, and replaced when the ping goes unanswered; a sharded
// one that Redis refused (the shard's slot moved: a failover, a
// resharding) is replaced once the cluster client has read the slot map
// again.
func (r *Redis) receive(rc *receiver) {
	defer r.running.Done()
	log := r.log.With("receiver", rc.name)
	var (
		backoff time.Duration
		pinged  bool // a health ping is unanswered
		down    bool // the last receive failed
	)
	pause := func() bool { // false when stopped meanwhile
		backoff = min(max(2*backoff, 50*time.Millisecond), retryMax)
		t := time.NewTimer(backoff)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-r.done:
		case <-rc.stop:
		}
		return false
	}
	for !rc.stopped(r.done) {
		if !r.pass(rc) {
			return
		}
		r.mu.Lock()
		ps := rc.ps
		r.mu.Unlock()
		if ps == nil {
			// Not opened yet: the Subscribe that made rc may be opening
			// it, or stopped before it could.
			r.sync(rc, false)
			continue
		}
		msg, err := ps.ReceiveTimeout(context.Background(), healthEvery)
		if rc.stopped(r.done) {
			return
		}
		var (
			nerr net.Error
			rerr redis.Error
		)
		switch {
		case err == nil:
			pinged, backoff = false, 0
			if down {
				down = false
				log.Info("notify: receiving again")
			}
			r.handle(rc, msg)
		case errors.As(err, &nerr) && nerr.Timeout():
			if !pinged {
				pinged = true
				ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
				_ = ps.Ping(ctx, "health")
				cancel()
				continue
			}
			log.Warn("notify: the receiving connection is silent; replacing it")
			r.reloadSlots(rc)
			r.sync(rc, true)
			pinged = false
		case rc.sharded && errors.As(err, &rerr):
			// An error reply: a SSUBSCRIBE refused with MOVED (the slot
			// is served elsewhere now) or CLUSTERDOWN (during a
			// failover). go-redis keeps a connection that answered, so
			// the receiver replaces it, to the slot's node as the slot
			// map says once it has been read again.
			if !down {
				down = true
				log.Warn("notify: the shard's subscription was refused; subscribing again", "err", err)
			}
			r.reloadSlots(rc)
			if !pause() {
				return
			}
			r.sync(rc, true)
		default:
			if !down {
				down = true
				log.Warn("notify: receiving failed; reconnecting", "err", err)
			}
			r.reloadSlots(rc)
			if !pause() {
				return
			}
		}
	}
}

// reloadSlots asks a cluster client to read the slot map again (in the
// background), so that the next connection of a sharded receiver goes to
// the shard's node as it is now. It does nothing for a classic receiver,
// whose channels any node serves, nor on another client.
func (r *Redis) reloadSlots(rc *receiver) {
	if rc.sharded && r.cluster != nil {
		r.cluster.ReloadState(context.Background())
	}
}

// handle acts on one message received by rc: a notification, which joins
// rc's backlog; a confirmation ping's answer; or a subscription reply.
// It never waits for the dispatcher, so that the answer to a confirmation
// is read whatever the notifications before it wait for.
func (r *Redis) handle(rc *receiver, msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		topic, ok := r.layout.topicOf(m.Channel, rc.sharded)
		if !ok {
			return
		}
		d := delivery{topic, m.Payload}
		if len(rc.backlog) == 0 {
			select {
			case r.received <- d:
				return
			default:
			}
		}
		rc.backlog = append(rc.backlog, d)
	case *redis.Pong:
		r.mu.Lock()
		if w, ok := r.pongs[m.Payload]; ok {
			delete(r.pongs, m.Payload)
			w.answer(rc)
		}
		r.mu.Unlock()
	case *redis.Subscription:
		if m.Kind != "sunsubscribe" {
			return
		}
		// Redis unsubscribes a shard channel's subscribers itself when
		// the node stops serving its slot. Subscribing again on the same
		// connection is harmless when the unsubscription was ours (a
		// topic unsubscribed and subscribed again) or the node still
		// serves the shard (a replica of the new master), and is refused
		// with MOVED otherwise, which replaces the connection.
		r.mu.Lock()
		_, want := rc.channels[m.Channel]
		if want && !r.closed.Load() {
			rc.changes = append(rc.changes, change{true, []string{m.Channel}})
		}
		r.mu.Unlock()
		if want {
			r.log.Debug("notify: Redis ended a shard's subscription; subscribing again", "receiver", rc.name, "channel", m.Channel)
			r.sync(rc, false) // a failed write breaks the connection, which go-redis redials and subscribes
		}
	}
}

// pass hands rc's backlog to the dispatcher, in order, and reports false
// when the bus or rc stopped meanwhile. It waits for room in the
// dispatcher's buffer only while no confirmation waits for rc's answer:
// then it returns with the rest still in the backlog, so that the
// receiver reads on to the answer. Otherwise a subscriber's function that
// calls Subscribe while the buffer is full (the dispatcher, the buffer's
// only reader, waiting for the answer) would wait for good. What the
// backlog holds then is bounded by what Redis had sent before the ping,
// which Redis bounds itself (client-output-buffer-limit pubsub).
func (r *Redis) pass(rc *receiver) bool {
	for len(rc.backlog) > 0 {
		select {
		case r.received <- rc.backlog[0]:
			rc.backlog = rc.backlog[1:]
			continue
		default:
		}
		r.mu.Lock()
		confirming := rc.confirming > 0
		r.mu.Unlock()
		if confirming {
			return true
		}
		select {
		case r.received <- rc.backlog[0]:
			rc.backlog = rc.backlog[1:]
		case <-rc.wake: // a confirmation began: look again
		case <-r.done:
			return false
		case <-rc.stop:
			return false
		}
	}
	rc.backlog = nil // let a long backlog's array go
	return true
}

// sync brings rc's connection in line with rc.channels. With reopen, or
// when rc has no connection yet, it opens one subscribed to every channel
// and closes the one it replaces; otherwise it writes the changes
// recorded since, in the order they were made. It makes its calls, which
// may dial, under rc.calls and outside mu. Once it returns, every change
// recorded before it was called has been written (by it, or by a sync
// that held rc.calls before it). It does nothing once rc or the bus has
// stopped, and a connection opened meanwhile is closed.
func (r *Redis) sync(rc *receiver, reopen bool) {
	rc.calls.Lock()
	defer rc.calls.Unlock()
	r.mu.Lock()
	if r.closed.Load() || rc.stopped(r.done) {
		r.mu.Unlock()
		return
	}
	old, changes := rc.ps, rc.changes
	rc.changes = nil
	fresh := reopen || old == nil
	var channels []string
	if fresh {
		// The new connection subscribes to what channels says now,
		// which includes every change recorded so far.
		channels = slices.Collect(maps.Keys(rc.channels))
	}
	r.mu.Unlock()

	if !fresh {
		if len(changes) == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		defer cancel()
		for _, c := range changes {
			if err := c.write(ctx, old, rc.sharded); err != nil {
				r.log.Debug("notify: writing a subscription change", "receiver", rc.name, "subscribe", c.subscribe, "channels", c.channels, "err", err)
			}
		}
		return
	}
	ps := r.open(rc.sharded, channels)
	r.mu.Lock()
	if r.closed.Load() || rc.stopped(r.done) {
		// Close, or the unsubscribe that stopped rc, closes the
		// connection rc had; this one is sync's to close.
		r.mu.Unlock()
		_ = ps.Close()
		return
	}
	rc.ps = ps
	r.mu.Unlock()
	if old != nil {
		_ = old.Close()
	}
}

// write writes c on ps: SSUBSCRIBE or SUNSUBSCRIBE on a sharded
// receiver's connection, SUBSCRIBE or UNSUBSCRIBE on the classic one's.
// go-redis records the channels even when the write fails, and subscribes
// to them again with its next connection.
func (c change) write(ctx context.Context, ps *redis.PubSub, sharded bool) error {
	switch {
	case sharded && c.subscribe:
		return ps.SSubscribe(ctx, c.channels...)
	case sharded:
		return ps.SUnsubscribe(ctx, c.channels...)
	case c.subscribe:
		return ps.Subscribe(ctx, c.channels...)
	default:
		return ps.Unsubscribe(ctx, c.channels...)
	}
}

// open returns a new receiving connection subscribed to channels: the
// subscription is recorded even when it fails, and made again with the
// next connection. A sharded connection is opened with its channels, so
// that a cluster client dials the node of their slot. It may dial: the
// caller does not hold mu.
func (r *Redis) open(sharded bool, channels []string) *redis.PubSub {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	defer cancel()
	if sharded {
		return r.client.SSubscribe(ctx, channels...)
	}
	return r.client.Subscribe(ctx, channels...)
}

// deliver hands the notifications the receivers got to the subscribers'
// functions, one at a time, until Close: the receivers go on reading (and
// answering confirmation pings, past a full buffer: see pass) while a
// function runs, so a function may call Subscribe.
func (r *Redis) deliver() {
	defer r.running.Done()
	for {
		select {
		case d := <-r.received:
			dispatch(&r.mu, &r.subs, d.topic, []byte(d.payload))
		case <-r.done:
			return
		}
	}
}
