package notify

import "testing"

func TestLayoutChannels(t *testing.T) {
	t.Parallel()
	l := layout{prefix: "weft:notify:", tags: []string{"{weft:notify:0~3}", "{weft:notify:1~42}"}, sharded: map[string]bool{"inbox": true}}
	if got := l.classicChannel("plugin"); got != "weft:notify:plugin" {
		t.Errorf("classic channel %q", got)
	}
	if got := l.shardChannel(1, "inbox"); got != "{weft:notify:1~42}:inbox" {
		t.Errorf("shard channel %q", got)
	}
	for _, c := range []struct {
		channel string
		sharded bool
		topic   string // "" when the channel is not the bus's
	}{
		{"weft:notify:plugin", false, "plugin"},
		{"weft:notify:", false, ""},
		{"other:plugin", false, ""},
		{"{weft:notify:1~42}:inbox", true, "inbox"},
		{"{weft:notify:0~3}:a}:b", true, "a}:b"},
		{"{weft:notify:0~3}:", true, ""},
		{"{other:0~3}:inbox", true, ""},
		{"weft:notify:inbox", true, ""},
	} {
		topic, ok := l.topicOf(c.channel, c.sharded)
		if ok != (c.topic != "") || topic != c.topic {
			t.Errorf("topicOf(%q, sharded %v) = %q, %v; want %q", c.channel, c.sharded, topic, ok, c.topic)
		}
	}
}
