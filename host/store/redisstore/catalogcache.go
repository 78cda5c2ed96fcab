package redisstore

import (
	"context"
	"crypto/rand"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/weftworks/weft/host/store"
	"github.com/weftworks/weft/host/weft"
)

// catalogCache keeps the decoded definitions and current plugin records
// that every start reads (the latest definition, the current version of
// each plugin it uses), and which change seldom.
//
// Every script that changes the catalog (PutDefinition, DeleteDefinition,
// PutPlugin, DeletePlugin) sets the store's catalog generation, the key
// cg, to a new random token, in the same step as the change. A read
// script answers the generation it read in, so an entry is tagged with the
// generation its value belongs to. The tokens are random rather than
// counted so that a generation lost with its change (a Redis restart with
// appendfsync everysec) is never handed out again for another change.
//
// The cache is used two ways:
//
//   - GetDefinition and CurrentPlugin read cg first (GET) and use an entry
//     only when its tag is that generation: then no change has been made
//     since the entry was read, on this node or any other.
//   - ResolveStart, for a start, uses the entries without a round trip
//     when the definition and every plugin it uses are cached with one
//     tag, and answers that tag as the StartCatalog's Generation. The
//     create commits with it (Commit.Catalog), and the commit script
//     compares it with cg, in the same step as the create: the start is as
//     if it had read the catalog then. When they differ the commit is
//     refused (ErrCatalogChanged) and the start reads the catalog again,
//     checked.
type catalogCache struct {
	mu      sync.Mutex
	seen    string // the generation of the last checked lookup
	defs    map[defID]cachedDef
	plugins map[string]cachedPlugin
}

// saw notes that the catalog's generation is gen now: when it is not the
// one seen last, every entry tagged otherwise is stale, and all are
// dropped, so that entries of deleted names and old versions do not
// accumulate.
func (c *catalogCache) saw(gen string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.seen {
		clear(c.defs)
		clear(c.plugins)
		c.seen = gen
	}
}

// defID names a definition lookup: version 0 is the latest.
type defID struct {
	name    string
	version int
}

type cachedDef struct {
	gen string
	d   weft.Definition
}

type cachedPlugin struct {
	gen string
	r   store.PluginRecord
}

// newGeneration returns a catalog generation token for a change.
func newGeneration() string { return rand.Text() }

// generation reads the store's catalog generation: "" when no change was
// ever made.
func (s *Store) generation(ctx context.Context) (string, error) {
	g, err := s.c.Get(ctx, s.p+"cg").Result()
	if errors.Is(err, redis.Nil) {
		return "", nil
	}
	return g, err
}

// unchecked returns a copy of the cached definition and the generation it
// was read in, whatever the catalog's generation is now.
func (c *catalogCache) unchecked(id defID) (*weft.Definition, string, bool) {
	c.mu.Lock()
	e, ok := c.defs[id]
	c.mu.Unlock()
	if !ok {
		return nil, "", false
	}
	d := e.d
	return &d, e.gen, true
}

// definition returns a copy of the cached definition, if valid at gen.
func (c *catalogCache) definition(id defID, gen string) (*weft.Definition, bool) {
	c.mu.Lock()
	e, ok := c.defs[id]
	c.mu.Unlock()
	if !ok || e.gen != gen {
		return nil, false
	}
	d := e.d
	return &d, true
}

func (c *catalogCache) putDefinition(id defID, gen string, d *weft.Definition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.defs == nil {
		c.defs = map[defID]cachedDef{}
	}
	c.defs[id] = cachedDef{gen: gen, d: *d}
}

// plugin returns a copy of the cached current record of plugin name, if
// valid at gen.
func (c *catalogCache) plugin(name, gen string) (*store.PluginRecord, bool) {
	c.mu.Lock()
	e, ok := c.plugins[name]
	c.mu.Unlock()
	if !ok || e.gen != gen {
		return nil, false
	}
	r := e.r
	return &r, true
}

func (c *catalogCache) putPlugin(name, gen string, r *store.PluginRecord) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plugins == nil {
		c.plugins = map[string]cachedPlugin{}
	}
	c.plugins[name] = cachedPlugin{gen: gen, r: *r}
}
