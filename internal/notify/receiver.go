package notify

import (
	"context"
	"errors"
	"maps"
	"net"
	"slices"
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
type receiver struct {
	name    string // in logs: "classic", "shard 3", "shards"
	sharded bool   // SSUBSCRIBE; else SUBSCRIBE

	// Guarded by Redis.mu.
	ps       *redis.PubSub       // replaced when silent or refused
	channels map[string]struct{} // what ps must be subscribed to

	stop chan struct{} // closed when the bus drops it (its last channel went)
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
		r.mu.Lock()
		ps := rc.ps
		r.mu.Unlock()
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
			r.replace(rc)
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
			r.replace(rc)
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

// handle acts on one message received by rc: a notification, a
// confirmation ping's answer, or a subscription reply.
func (r *Redis) handle(rc *receiver, msg any) {
	switch m := msg.(type) {
	case *redis.Message:
		topic, ok := r.layout.topicOf(m.Channel, rc.sharded)
		if !ok {
			return
		}
		select {
		case r.received <- delivery{topic, m.Payload}:
		case <-r.done:
		case <-rc.stop:
		}
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
		defer r.mu.Unlock()
		if _, want := rc.channels[m.Channel]; !want || r.closed.Load() {
			return
		}
		r.log.Debug("notify: Redis ended a shard's subscription; subscribing again", "receiver", rc.name, "channel", m.Channel)
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		_ = rc.ps.SSubscribe(ctx, m.Channel) // a failed write breaks the connection, which go-redis redials and subscribes
		cancel()
	}
}

// replace closes rc's connection and opens another one subscribed to rc's
// channels. Only rc's goroutine calls it.
func (r *Redis) replace(rc *receiver) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed.Load() || rc.stopped(r.done) {
		return
	}
	old := rc.ps
	rc.ps = r.open(rc.sharded, slices.Collect(maps.Keys(rc.channels)))
	_ = old.Close()
}

// open returns a new receiving connection subscribed to channels: the
// subscription is recorded even when it fails, and made again with the
// next connection. A sharded connection is opened with its channels, so
// that a cluster client dials the node of their slot.
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
// answering confirmation pings) while a function runs, so a function may
// call Subscribe.
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
