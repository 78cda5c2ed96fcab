// Package redisblobs stores plugin modules in Redis by content hash: the
// [plugins.Blobs] of cluster mode, so that a plugin uploaded through one node
// is usable on every node without a restart. Each node still compiles a
// module on first use and keeps its own compilation cache on disk.
//
// # Notes
//
//   - One string key per module, prefix + ":sha256:" + hash. A key holds
//     one value and no operation touches two keys, so no hash tag is
//     needed on Redis Cluster.
//   - Put refuses data whose sha256 is not the hash it is stored under:
//     the store is shared by every node, and a wrong entry would be served
//     to all of them. It writes with SET NX, so storing a hash again is a
//     no-op whatever the data, and concurrent uploads of one module from
//     several nodes store it once.
//   - Durability is the server's: Put returns once Redis has acknowledged
//     the write, which is on disk when Redis runs with appendonly yes and
//     appendfsync always, or within about a second with everysec
//     (docs/cluster.md).
//   - Modules are limited by Redis's proto-max-bulk-len (512 MiB by
//     default), well above the host's upload limit.
package redisblobs

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/plugins"
)

// blobs is a plugins.Blobs on Redis, safe for concurrent use.
type blobs struct {
	client redis.UniversalClient
	prefix string
}

// New returns blobs keeping modules under prefix (defaults to
// "weft:plugins" when empty) through client.
func New(client redis.UniversalClient, prefix string) plugins.Blobs {
	if prefix == "" {
		prefix = "weft:plugins"
	}
	return &blobs{client: client, prefix: prefix}
}

// key returns the key of hash, or an error naming hash when it is not a
// lower-case sha256 hex digest.
func (b *blobs) key(hash string) (string, error) {
	if !plugins.IsHash(hash) {
		return "", fmt.Errorf("redisblobs: %q is not a sha256 hex digest", hash)
	}
	return b.prefix + ":sha256:" + hash, nil
}

// Put implements plugins.Blobs. It refuses data that does not hash to hash.
func (b *blobs) Put(ctx context.Context, hash string, data []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key, err := b.key(hash)
	if err != nil {
		return err
	}
	if got := plugins.Hash(data); got != hash {
		return fmt.Errorf("redisblobs: refusing to store %d bytes under %s: their sha256 is %s", len(data), hash, got)
	}
	if err := b.client.SetNX(ctx, key, data, 0).Err(); err != nil {
		return b.fail(ctx, "storing", hash, err)
	}
	return nil
}

// Get implements plugins.Blobs.
func (b *blobs) Get(ctx context.Context, hash string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	key, err := b.key(hash)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", plugins.ErrNotFound, err)
	}
	data, err := b.client.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("redisblobs: %s: %w", hash, plugins.ErrNotFound)
	}
	if err != nil {
		return nil, b.fail(ctx, "reading", hash, err)
	}
	return data, nil
}

// Delete implements plugins.Blobs.
func (b *blobs) Delete(ctx context.Context, hash string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key, err := b.key(hash)
	if err != nil {
		return err
	}
	if err := b.client.Del(ctx, key).Err(); err != nil {
		return b.fail(ctx, "deleting", hash, err)
	}
	return nil
}

// fail returns ctx.Err() when ctx ended, and otherwise err with what was
// being done to which hash.
func (b *blobs) fail(ctx context.Context, doing, hash string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("redisblobs: %s %s: %w", doing, hash, err)
}
