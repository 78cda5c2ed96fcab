package boltstore

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/weftworks/weft/host/store"
	"github.com/weftworks/weft/host/weft"
)

// catalogCache keeps decoded definitions and plugin records, which every
// start reads (the latest definition, the current version of each plugin
// it uses) and which change seldom. The file is this process's alone (bbolt
// locks it), so every change goes through the store's own writes, and each
// of them bumps gen once its transaction has ended, committed or not.
//
// An entry is valid for the generation it was read in. A reader takes the
// generation before it reads: a write that commits meanwhile bumps gen
// after its commit, so what the reader caches is either already the new
// value or tagged with a generation that has passed; it is never an old
// value tagged with the new generation.
type catalogCache struct {
	gen atomic.Uint64

	mu      sync.Mutex
	defs    map[defID]cachedDef
	plugins map[string]cachedPlugin
}

// defID names a definition lookup: version 0 is the latest.
type defID struct {
	name    string
	version int
}

type cachedDef struct {
	gen uint64
	d   weft.Definition
}

type cachedPlugin struct {
	gen uint64
	p   store.Plugin
}

// changed invalidates every entry: a catalog write has ended.
func (c *catalogCache) changed() {
	c.gen.Add(1)
	c.mu.Lock()
	clear(c.defs)
	clear(c.plugins)
	c.mu.Unlock()
}

// definition returns a copy of the cached definition, if valid at gen.
func (c *catalogCache) definition(id defID, gen uint64) (*weft.Definition, bool) {
	c.mu.Lock()
	e, ok := c.defs[id]
	c.mu.Unlock()
	if !ok || e.gen != gen {
		return nil, false
	}
	d := e.d
	return &d, true
}

func (c *catalogCache) putDefinition(id defID, gen uint64, d *weft.Definition) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.defs == nil {
		c.defs = map[defID]cachedDef{}
	}
	c.defs[id] = cachedDef{gen: gen, d: *d}
}

// plugin returns a copy of the cached plugin record, if valid at gen.
func (c *catalogCache) plugin(name string, gen uint64) (*store.Plugin, bool) {
	c.mu.Lock()
	e, ok := c.plugins[name]
	c.mu.Unlock()
	if !ok || e.gen != gen {
		return nil, false
	}
	p := e.p
	p.Versions = slices.Clone(p.Versions)
	return &p, true
}

func (c *catalogCache) putPlugin(name string, gen uint64, p *store.Plugin) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.plugins == nil {
		c.plugins = map[string]cachedPlugin{}
	}
	cp := *p
	cp.Versions = slices.Clone(p.Versions)
	c.plugins[name] = cachedPlugin{gen: gen, p: cp}
}
