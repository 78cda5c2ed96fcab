package embedded

import (
	"slices"
	"sync/atomic"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/internal/store/internal/gencache"
)

// catalogCache keeps decoded definitions, plugin records and workflow
// pauses, which every start reads (the latest definition, the current
// version of each plugin it uses, whether its workflow is paused) and
// which change seldom. The file is this process's alone (bbolt locks it),
// so every change goes through the store's own writes, and each of them
// bumps gen once its transaction has ended, committed or not.
//
// An entry is valid for the generation it was read in. A reader takes the
// generation before it reads: a write that commits meanwhile bumps gen
// after its commit, so what the reader caches is either already the new
// value or tagged with a generation that has passed; it is never an old
// value tagged with the new generation.
type catalogCache struct {
	gen atomic.Uint64

	defs    gencache.Cache[defID, uint64, weft.Definition]
	plugins gencache.Cache[string, uint64, weft.Plugin]
	// pauses holds every workflow pause, by workflow name, under the one
	// key struct{}{}: read whole, so that one read answers every workflow
	// until the next change. Its maps are never changed once cached.
	pauses gencache.Cache[struct{}, uint64, map[string]weft.WorkflowPause]
}

// defID names a definition lookup: version 0 is the latest.
type defID struct {
	name    string
	version int
}

// changed invalidates every entry: a catalog write (of a definition, a
// plugin or a workflow pause) has ended. Each call observes a generation of
// its own, so each empties the three caches.
func (c *catalogCache) changed() {
	gen := c.gen.Add(1)
	c.defs.Observe(gen)
	c.plugins.Observe(gen)
	c.pauses.Observe(gen)
}

// plugin returns a copy of the cached plugin record, if valid at gen,
// with a list of versions of its own.
func (c *catalogCache) plugin(name string, gen uint64) (*weft.Plugin, bool) {
	p, ok := c.plugins.Get(name, gen)
	if !ok {
		return nil, false
	}
	p.Versions = slices.Clone(p.Versions)
	return &p, true
}

// putPlugin caches a copy of p, read in gen, with a list of versions of
// its own.
func (c *catalogCache) putPlugin(name string, gen uint64, p *weft.Plugin) {
	cp := *p
	cp.Versions = slices.Clone(p.Versions)
	c.plugins.Put(name, gen, cp)
}
