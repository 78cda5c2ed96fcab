package node_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/weftworks/weft/host/node"
)

// TestConfigValidate: Validate names every impossible field, each by its
// Go name (an address by its index), and judges a Config as it is.
func TestConfigValidate(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		cfg    node.Config
		fields []string
		want   string // in the error
	}{
		{"embedded", node.Config{DataDir: "d", Store: node.StoreEmbedded, QueueCapacity: 1}, nil, ""},
		{"redis", node.Config{DataDir: "d", Store: node.StoreRedis, RedisAddrs: []string{"a:1", "[::1]:6379"}, QueueCapacity: 1, RedisShards: 1}, nil, ""},
		{"redis shards", node.Config{DataDir: "d", Store: node.StoreRedis, RedisAddrs: []string{"a:1"}, QueueCapacity: 1, RedisShards: 1025},
			[]string{"RedisShards"}, "RedisShards must be from 1 to 1024, got 1025"},
		{"redis partitions", node.Config{DataDir: "d", Store: node.StoreRedis, RedisAddrs: []string{"a:1"}, QueueCapacity: 1, RedisShards: 1, RedisPartitions: 1025},
			[]string{"RedisPartitions"}, "RedisPartitions must be from 0 to 1024, got 1025"},
		{"partitions without redis", node.Config{DataDir: "d", Store: node.StoreEmbedded, QueueCapacity: 1, RedisPartitions: 4},
			[]string{"RedisPartitions"}, `RedisPartitions is 4, but Store "embedded" has no Redis to divide`},
		{"redis without shards", node.Config{DataDir: "d", Store: node.StoreRedis, RedisAddrs: []string{"a:1"}, QueueCapacity: 1},
			[]string{"RedisShards"}, "RedisShards must be from 1 to 1024, got 0"},
		{"blank data dir", node.Config{DataDir: " ", Store: node.StoreEmbedded, QueueCapacity: 1}, []string{"DataDir"}, "node: DataDir is required"},
		{"no store", node.Config{DataDir: "d", QueueCapacity: 1}, []string{"Store"}, `Store must be "embedded" or "redis", got ""`},
		{"bad addresses", node.Config{DataDir: "d", Store: node.StoreRedis, RedisAddrs: []string{"a:1", "localhost", "b:99999"}, QueueCapacity: 1, RedisShards: 1},
			[]string{"RedisAddrs[1]", "RedisAddrs[2]"}, `RedisAddrs[1] must be HOST:PORT, got "localhost"`},
		{"redis cluster", node.Config{DataDir: "d", Store: node.StoreRedis, RedisCluster: []string{"a:1", "[::1]:7000"}, QueueCapacity: 1, RedisShards: 16}, nil, ""},
		{"redis servers and cluster", node.Config{DataDir: "d", Store: node.StoreRedis, RedisAddrs: []string{"a:1"}, RedisCluster: []string{"b:2"}, QueueCapacity: 1, RedisShards: 1},
			[]string{"RedisCluster"}, "RedisAddrs and RedisCluster are both set"},
		{"redis without either", node.Config{DataDir: "d", Store: node.StoreRedis, QueueCapacity: 1, RedisShards: 1},
			[]string{"RedisAddrs"}, `Store "redis" needs at least one address in RedisAddrs or RedisCluster`},
		{"bad seeds", node.Config{DataDir: "d", Store: node.StoreRedis, RedisCluster: []string{"localhost", "a:1", "b:x"}, QueueCapacity: 1, RedisShards: 1},
			[]string{"RedisCluster[0]", "RedisCluster[2]"}, `RedisCluster[2] must have a port between 0 and 65535, got "x"`},
		{"seeds judged in embedded mode too", node.Config{DataDir: "d", Store: node.StoreEmbedded, RedisCluster: []string{"a b:1"}, QueueCapacity: 1},
			[]string{"RedisCluster[0]"}, `RedisCluster[0] must have a host name or IP address, got "a b"`},
		{"no queue", node.Config{DataDir: "d", Store: node.StoreEmbedded}, []string{"QueueCapacity"}, "QueueCapacity must be at least 1, got 0"},
		{"shards without redis", node.Config{DataDir: "d", Store: node.StoreEmbedded, QueueCapacity: 1, RedisShards: 4},
			[]string{"RedisShards"}, `RedisShards is 4, but Store "embedded" has no Redis to divide`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.cfg.Validate()
			var fields []string
			if err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var ce *node.ConfigError
					if !errors.As(e, &ce) {
						t.Fatalf("%v is not a *ConfigError", e)
					}
					fields = append(fields, ce.Field)
				}
			}
			if !slices.Equal(fields, tt.fields) {
				t.Errorf("Validate named %v, want %v: %v", fields, tt.fields, err)
			}
			if tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("Validate: %v, want %q", err, tt.want)
			}
		})
	}
}
