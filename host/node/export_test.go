package node

import (
	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/engine"
	"github.com/weftworks/weft/internal/store"
	"github.com/weftworks/weft/plugins"
)

// The node's own tests reach behind the façade, to the parts it wires;
// nothing else can (docs/architecture.md, "The node is the one door").

// Engine returns the node's engine.
func (n *Node) Engine() *engine.Engine { return n.engine }

// Store returns the node's store.
func (n *Node) Store() store.Store { return n.store }

// Runtime returns the node's plugin runtime.
func (n *Node) Runtime() *plugins.Runtime { return n.rt }

// WithRedisHook returns c with h watching every command that the node's
// Redis Cluster client sends, from the first, on the cluster client and on
// each node's client.
func WithRedisHook(c Config, h redis.Hook) Config {
	c.redisHook = h
	return c
}
