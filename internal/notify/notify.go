// Package notify carries notifications between the nodes of a cluster, over
// Redis pub/sub ([Redis]): a message in an instance's inbox (a cancel, a
// stimulus, a child's end) wakes the node that runs it, and an instance's
// change wakes the ?wait= requests that other nodes hold for it. Embedded
// mode has one node and needs no bus: the engine wakes its own waiters.
//
// # Delivery is at most once
//
// A notification published while a node is disconnected from Redis (a
// Redis restart, a network cut, a node pause, the failover of the master
// that serves a shard) is lost for that node, and so is one published
// before a Subscribe has returned. Notifications are therefore a latency
// optimisation and never the record: correctness comes from the store (the
// instance's inbox, the cancel flag, the definitions) and from the ready
// queue, which every node also reads on its own schedule. A notification
// says "look now" instead of "look at the next sweep".
//
// # Order and callbacks
//
// Each bus calls its subscribers' functions on one goroutine of its own, in
// the order the notifications arrived on each of its connections: per
// publisher, the order it published in, for a topic that is not sharded,
// and for the payloads of one shard of a sharded topic (two payloads of
// different shards travel on different connections, and may arrive in
// either order). A function must therefore return quickly and hand longer
// work to another goroutine; it may call Publish, Subscribe and
// unsubscribe. Each call gets its own copy of the payload.
//
// # Shards
//
// On a Redis Cluster a classic PUBLISH is broadcast to every node of the
// cluster. The topics whose payload is an instance id can go sharded
// instead (RedisConfig.Shards, RedisConfig.Sharded): each payload to the
// channel of its shard with SPUBLISH, which the cluster delivers within the
// shard's slot's master and replicas alone. Every bus still receives every
// shard: the engine wakes the instances that it runs whichever shard
// their ids fall in.
package notify

import (
	"errors"
	"fmt"
	"sync"
)

// ErrClosed is returned by the methods of a closed bus.
var ErrClosed = errors.New("notify: bus closed")

// checkTopic refuses an empty topic, naming the operation.
func checkTopic(op, topic string) error {
	if topic == "" {
		return fmt.Errorf("notify: %s: empty topic", op)
	}
	return nil
}

// subscribers is the registry the bus keeps: the functions subscribed to
// each topic. It is not safe for concurrent use; its owner locks.
type subscribers struct {
	next   uint64
	topics map[string]map[uint64]func([]byte)
}

// add registers fn on topic and returns its id and whether it is the
// topic's first subscriber.
func (s *subscribers) add(topic string, fn func([]byte)) (id uint64, first bool) {
	if s.topics == nil {
		s.topics = map[string]map[uint64]func([]byte){}
	}
	fns := s.topics[topic]
	if fns == nil {
		fns = map[uint64]func([]byte){}
		s.topics[topic] = fns
	}
	s.next++
	fns[s.next] = fn
	return s.next, len(fns) == 1
}

// remove drops subscription id from topic and reports whether the topic
// has no subscriber left. Removing twice reports false the second time.
func (s *subscribers) remove(topic string, id uint64) (last bool) {
	fns := s.topics[topic]
	if _, ok := fns[id]; !ok {
		return false
	}
	delete(fns, id)
	if len(fns) == 0 {
		delete(s.topics, topic)
		return true
	}
	return false
}

// of returns the functions subscribed to topic, in subscription order.
func (s *subscribers) of(topic string) []subscription {
	fns := s.topics[topic]
	out := make([]subscription, 0, len(fns))
	for id, fn := range fns {
		out = append(out, subscription{id, fn})
	}
	// A handful of subscribers per topic: insertion sort keeps it simple.
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].id < out[j-1].id; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// has reports whether subscription id of topic is still registered.
func (s *subscribers) has(topic string, id uint64) bool {
	_, ok := s.topics[topic][id]
	return ok
}

type subscription struct {
	id uint64
	fn func([]byte)
}

// dispatch calls the functions subscribed to topic with payload, skipping
// those unsubscribed since (checked under mu just before each call), so
// that a function is not called after its unsubscribe returned, except for
// a call already in progress.
func dispatch(mu *sync.Mutex, subs *subscribers, topic string, payload []byte) {
	mu.Lock()
	list := subs.of(topic)
	mu.Unlock()
	for _, s := range list {
		mu.Lock()
		ok := subs.has(topic, s.id)
		mu.Unlock()
		if ok {
			s.fn(append([]byte(nil), payload...))
		}
	}
}
