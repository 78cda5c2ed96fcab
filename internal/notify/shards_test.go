package notify_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/notify"
	"github.com/weftworks/weft/internal/partition"
	"github.com/weftworks/weft/internal/redistest"
)

func TestNewRedisRefusesBadConfig(t *testing.T) {
	t.Parallel()
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"}) // never dialled
	t.Cleanup(func() { _ = client.Close() })
	for _, c := range []struct {
		name string
		cfg  notify.RedisConfig
		want string // in the error; "" for none
	}{
		{"negative shards", notify.RedisConfig{Client: client, Shards: -1}, "RedisConfig.Shards is -1: want 1 to 1024"},
		{"too many shards", notify.RedisConfig{Client: client, Shards: partition.Max + 1}, "RedisConfig.Shards is 1025"},
		{"an empty sharded topic", notify.RedisConfig{Client: client, Shards: 2, Sharded: []string{"inbox", ""}}, "RedisConfig.Sharded: empty topic"},
		{"a brace in the prefix of shards", notify.RedisConfig{Client: client, Prefix: "weft:{n}:", Shards: 2}, "RedisConfig.Prefix with 2 shards"},
		{"a brace in the prefix of one shard", notify.RedisConfig{Client: client, Prefix: "weft:{n}:", Sharded: []string{"inbox"}}, ""},
		{"64 shards", notify.RedisConfig{Client: client, Shards: 64, Sharded: []string{"inbox"}}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r, err := notify.NewRedis(c.cfg)
			if c.want == "" {
				if err != nil {
					t.Fatalf("NewRedis: %v", err)
				}
				if err := r.Close(); err != nil {
					t.Fatalf("Close: %v", err)
				}
				return
			}
			if err == nil {
				_ = r.Close()
				t.Fatalf("NewRedis accepted the configuration, want an error with %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("NewRedis: %v, want an error with %q", err, c.want)
			}
		})
	}
}

func TestRedisConfigDefaults(t *testing.T) {
	t.Parallel()
	got := notify.RedisConfig{}.WithDefaults()
	if got.Prefix != "weft:notify:" || got.Shards != 1 || got.Logger == nil || got.Sharded != nil {
		t.Fatalf("defaults: %+v", got)
	}
}

// The channels a sharded bus uses, as Redis sees them: a sharded topic's
// payload goes by SPUBLISH to the channel of its shard, "{tag}:topic"; a
// classic topic's by PUBLISH to Prefix + topic; and a shard's receiving
// connection is closed with the last sharded subscription.
func TestRedisShardedChannels(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	admin := s.Client(t)
	const prefix, shards = "weft:notify:", 4
	bus, err := notify.NewRedis(notify.RedisConfig{Client: s.Client(t), Shards: shards, Sharded: []string{"inbox", "changed"}, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = bus.Close() })
	ctx := timeout(t, 30*time.Second)
	tags, err := partition.Tags(prefix, shards)
	if err != nil {
		t.Fatal(err)
	}

	if n := bus.Receivers(); n != 1 {
		t.Fatalf("%d receiving connections before any subscription, want 1 (the classic one)", n)
	}
	var unsubs []func()
	for _, topic := range []string{"inbox", "changed", "plugin"} {
		unsub, err := bus.Subscribe(ctx, topic, func([]byte) {})
		if err != nil {
			t.Fatal(err)
		}
		unsubs = append(unsubs, unsub)
	}
	if n := bus.Receivers(); n != 2 {
		t.Fatalf("%d receiving connections, want 2: the classic one and one for every shard on a plain client", n)
	}
	var wantShard []string
	for _, tag := range tags {
		wantShard = append(wantShard, tag+":changed", tag+":inbox")
	}
	if got := sorted(t, admin.PubSubShardChannels(ctx, "*").Result); strings.Join(got, " ") != strings.Join(sortedCopy(wantShard), " ") {
		t.Errorf("shard channels %q, want %q", got, sortedCopy(wantShard))
	}
	if got := sorted(t, admin.PubSubChannels(ctx, "*").Result); strings.Join(got, " ") != prefix+"plugin" {
		t.Errorf("classic channels %q, want only %s", got, prefix+"plugin")
	}

	// A raw subscriber of one shard's channel receives the payloads of
	// that shard, and only those.
	id := idsOfShards(shards, "x")
	raw := admin.SSubscribe(ctx, tags[2]+":inbox")
	t.Cleanup(func() { _ = raw.Close() })
	if _, err := raw.Receive(ctx); err != nil { // the subscription's reply
		t.Fatal(err)
	}
	for _, p := range id {
		if err := bus.Publish(ctx, "inbox", []byte(p)); err != nil {
			t.Fatal(err)
		}
	}
	msg, err := raw.ReceiveMessage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Payload != id[2] {
		t.Fatalf("shard 2's channel got %q, want %q (of shard 2)", msg.Payload, id[2])
	}

	for _, unsub := range unsubs {
		unsub()
	}
	if n := bus.Receivers(); n != 1 {
		t.Fatalf("%d receiving connections after the last unsubscribe, want 1", n)
	}
	// Only the raw subscriber is left on a shard channel.
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := sorted(t, admin.PubSubShardChannels(ctx, "*").Result)
		if strings.Join(got, " ") == tags[2]+":inbox" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("shard channels %q after the last unsubscribe, want only the raw subscriber's", got)
		}
		tick := time.NewTimer(20 * time.Millisecond)
		<-tick.C
	}
}

func sorted(t *testing.T, list func() ([]string, error)) []string {
	t.Helper()
	got, err := list()
	if err != nil {
		t.Fatal(err)
	}
	return sortedCopy(got)
}

func sortedCopy(s []string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}
