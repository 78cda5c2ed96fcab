package redisstore

import (
	"context"
	"maps"
	"slices"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/internal/store"
)

// pinsExist checks, in the catalog, that every plugin version of pins
// (name → version) is stored: what a whole store's commit checks for a
// create that carries no catalog generation, and a partition cannot (the
// plugins are in the catalog). The error matches weft.ErrNotFound and
// names the instance and the first missing version.
func (s *Store) pinsExist(ctx context.Context, id string, pins map[string]string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	names := slices.Sorted(maps.Keys(pins))
	cmds := make([]*redis.BoolCmd, len(names))
	if _, err := s.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, n := range names {
			cmds[i] = p.HExists(ctx, s.p+"p:"+n, pins[n])
		}
		return nil
	}); err != nil {
		return s.fail(ctx, "check the plugins pinned by instance", id, err)
	}
	for i, c := range cmds {
		if !c.Val() {
			return store.NotFound("instance %q pins plugin %q version %s", id, names[i], pins[names[i]])
		}
	}
	return nil
}
