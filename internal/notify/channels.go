package notify

import (
	"strings"

	"github.com/weftworks/weft/internal/partition"
)

// layout is where a Redis bus sends each notification: the channel of a
// topic, and for a sharded topic the shard of a payload. It is fixed when
// the bus is made and every node computes the same from the same
// configuration.
type layout struct {
	prefix  string
	sharded map[string]bool // the sharded topics; empty when there is one shard
	tags    []string        // the shards' hash tags, partition.Tags(prefix, shards); nil with one shard
}

// isSharded reports whether topic goes on sharded pub/sub.
func (l layout) isSharded(topic string) bool { return l.sharded[topic] }

// classicChannel is the channel of a topic that is not sharded: Prefix +
// topic, as before shards existed.
func (l layout) classicChannel(topic string) string { return l.prefix + topic }

// shardChannel is the channel of shard q of a sharded topic: the shard's
// hash tag, a colon and the topic, "{weft:notify:3~17}:inbox", so that
// every sharded topic of one shard is in the shard's slot.
func (l layout) shardChannel(q int, topic string) string { return l.tags[q] + ":" + topic }

// shardOf returns the shard of a payload of a sharded topic: its
// partition, as the store's partition of the same instance id when the
// numbers agree.
func (l layout) shardOf(payload []byte) int { return partition.Of(string(payload), len(l.tags)) }

// topicOf returns the topic of a channel of the bus, and false for a
// channel that is not one (a message from a channel of another prefix).
func (l layout) topicOf(channel string, sharded bool) (string, bool) {
	var topic string
	ok := false
	if !sharded {
		topic, ok = strings.CutPrefix(channel, l.prefix)
	} else if strings.HasPrefix(channel, "{"+l.prefix) {
		// A tag is "{" + prefix + "…}" and the prefix has no brace: the
		// first "}" ends it.
		_, topic, ok = strings.Cut(channel, "}:")
	}
	if !ok || topic == "" {
		return "", false
	}
	return topic, true
}
