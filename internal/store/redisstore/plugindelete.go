package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/weftworks/weft/internal/store"
)

// Two-phase plugin delete: the catalog's side of DeletePlugin in a
// partitioned store. A plugin may be deleted only while no live instance
// pins it, and the pins (P u:<plugin>) are in the partitions, which the
// catalog's script cannot read. The router therefore fences the creates
// first, then counts the pins, then deletes:
//
//  1. beginPluginDelete moves the catalog to generation gen (order n) and
//     hands out a barrier of order n+1 that it does not set as cg. The
//     router copies the barrier into every partition (copyGeneration): a
//     create carrying a generation of order n or less, that is one that
//     may have read the plugin, is refused there from then on, and reads
//     the catalog again.
//  2. The router reads the pins in every partition (pinsOf).
//  3. finishPluginDelete deletes the plugin if the catalog is still at gen
//     and no partition named a pin. Either way it moves the catalog past
//     the barrier (order n+2), so that creates that read the catalog anew
//     are accepted by the partitions again, and raise theirs.
//
// A change between 1 and 3 (another node's PutPlugin, say, which may have
// pinned instances read the plugin before the fence) moves cg off gen:
// finishPluginDelete then deletes nothing and returns errCatalogMoved, and
// the router starts again. A router that dies after copying the barrier
// leaves creates refused until a catalog change orders after it:
// raiseGeneration makes one.

// errCatalogMoved is finishPluginDelete's refusal: the catalog's
// generation is no longer the one beginPluginDelete set, so the pins the
// router counted may be out of date. Nothing was deleted: start again.
var errCatalogMoved = errors.New("catalog changed during the plugin delete")

// beginPluginDeleteScript is beginPluginDelete. ARGV: name, a random token
// for the generation, another for the barrier. It returns {"notfound"} or
// {"ok", generation, barrier}.
var beginPluginDeleteScript = script(`
local name, r, rb = take(), take(), take()
if redis.call("EXISTS", P .. "p:" .. name) == 0 then return {"notfound"} end
local gen = bumpGeneration(r)
local barrier = string.format("%015.0f", redis.call("INCR", P .. "cgn")) .. "." .. rb
return {"ok", gen, barrier}
`)

// finishPluginDeleteScript is finishPluginDelete. ARGV: name, the
// generation beginPluginDelete set, "1" if an instance pins the plugin
// else "0", a random token for the next generation. It returns {"moved"}
// (and writes nothing), {"inuse"} or {"ok"}; the latter two after moving
// the generation past the barrier.
var finishPluginDeleteScript = script(`
local name, gen, inuse, r = take(), take(), take() == "1", take()
if (redis.call("GET", P .. "cg") or "") ~= gen then return {"moved"} end
if inuse then
  bumpGeneration(r)
  return {"inuse"}
end
redis.call("DEL", P .. "p:" .. name, P .. "o:" .. name)
redis.call("ZREM", P .. "pn", name)
bumpGeneration(r)
return {"ok"}
`)

// raiseGenerationScript is raiseGeneration. ARGV: the generation to order
// after, a random token for the new one. It returns the generation cg
// holds after it.
var raiseGenerationScript = script(`
local above, r = take(), take()
local cur = redis.call("GET", P .. "cg") or ""
local want = genOrder(above)
if genOrder(cur) <= want then
  if (tonumber(redis.call("GET", P .. "cgn") or "0") or 0) < want then
    redis.call("SET", P .. "cgn", string.format("%.0f", want))
  end
  cur = bumpGeneration(r)
end
return cur
`)

// beginPluginDelete starts the delete of plugin name in the catalog: it
// sets the catalog's generation to gen (order n) and returns with it the
// barrier, a generation of order n+1 that the router copies into every
// partition before it counts their pins. ErrNotFound when the plugin does
// not exist, as DeletePlugin.
func (s *Store) beginPluginDelete(ctx context.Context, name string) (gen, barrier string, err error) {
	if err := s.begin(ctx); err != nil {
		return "", "", err
	}
	res, err := s.write(ctx, beginPluginDeleteScript, s.args(name, newGeneration(), newGeneration())).Result()
	if err != nil {
		return "", "", s.fail(ctx, "begin delete of plugin", name, err)
	}
	reason, rest, _ := refusal(res)
	switch {
	case reason == "notfound":
		return "", "", store.NotFound("plugin %q", name)
	case reason == "ok" && len(rest) == 2:
		gen, _ = rest[0].(string)
		barrier, _ = rest[1].(string)
		if gen != "" && barrier != "" {
			return gen, barrier, nil
		}
	}
	return "", "", fmt.Errorf("redisstore: begin delete of plugin %q on %s: unexpected answer %v", name, s.addr, res)
}

// finishPluginDelete ends the delete of plugin name that
// beginPluginDelete began with generation gen, given users, the instances
// the partitions named as pinning it (at most weft.MaxInUseListed are
// kept). When the catalog is no longer at gen it deletes nothing and
// returns an error matching errCatalogMoved. When users is not empty it
// deletes nothing and returns DeletePlugin's *weft.InUseError. Otherwise it
// deletes the plugin, as DeletePlugin. Both of the latter move the
// catalog's generation past the barrier.
func (s *Store) finishPluginDelete(ctx context.Context, name, gen string, users []string) error {
	if err := s.begin(ctx); err != nil {
		return err
	}
	inuse := "0"
	if len(users) > 0 {
		inuse = "1"
	}
	res, err := s.write(ctx, finishPluginDeleteScript, s.args(name, gen, inuse, newGeneration())).Result()
	if err != nil {
		return s.fail(ctx, "finish delete of plugin", name, err)
	}
	switch reason, _, _ := refusal(res); reason {
	case "ok":
		return nil
	case "inuse":
		return inUse(name, users)
	case "moved":
		return fmt.Errorf("redisstore: delete plugin %q on %s: the catalog left generation %s: %w", name, s.addr, gen, errCatalogMoved)
	}
	return fmt.Errorf("redisstore: finish delete of plugin %q on %s: unexpected answer %v", name, s.addr, res)
}

// raiseGeneration moves the catalog's generation after above when it is
// not after it already, and returns the generation the catalog holds: a
// barrier whose deleter died (beginPluginDelete without its finish) keeps
// refusing creates in the partitions until the catalog orders after it.
func (s *Store) raiseGeneration(ctx context.Context, above string) (string, error) {
	if err := s.begin(ctx); err != nil {
		return "", err
	}
	g, err := s.write(ctx, raiseGenerationScript, s.args(above, newGeneration())).Text()
	if err != nil {
		return "", s.fail(ctx, "raise catalog generation above", above, err)
	}
	return g, nil
}

// pinsOf returns up to n of the instances that pin plugin in this store
// (a partition's, in a partitioned store), for beginPluginDelete's router.
func (s *Store) pinsOf(ctx context.Context, plugin string, n int) ([]string, error) {
	if err := s.begin(ctx); err != nil {
		return nil, err
	}
	if n <= 0 {
		return nil, nil
	}
	ids, err := s.c.ZRange(ctx, s.p+"u:"+plugin, 0, int64(n-1)).Result()
	if err != nil {
		return nil, s.fail(ctx, "instances pinning plugin", plugin, err)
	}
	return ids, nil
}
