// Package gencache is the stores' cache of decoded catalog records: each
// entry is tagged with the generation of the catalog it was read in, is
// used only while the caller's generation is that one, and every entry is
// dropped when the generation moves on. The store decides what a
// generation is and when it changes: the embedded store counts its own writes,
// redisstore reads a token that every catalog change sets and that its
// commit script checks.
package gencache

import "sync"

// Cache maps keys of type K to values of type V, each tagged with the
// generation (of type G) it was read in. The zero value is an empty cache
// that has observed the zero generation; a Cache is safe for concurrent
// use and must not be copied after first use.
//
// # Notes
//
// Values are kept and handed out by value: a V that holds slices, maps or
// pointers shares them with every caller, so a store that hands out what
// callers may change copies those parts itself.
//
// The cache has no size bound of its own: it holds what was read since
// the generation last changed (Observe), and every catalog change empties
// it.
type Cache[K comparable, G comparable, V any] struct {
	mu      sync.Mutex
	gen     G // the generation observed last
	entries map[K]entry[G, V]
}

type entry[G comparable, V any] struct {
	gen G
	v   V
}

// Get returns the value cached for k if it was read in generation gen:
// then nothing has changed since it was read, as far as gen tells.
func (c *Cache[K, G, V]) Get(k K, gen G) (V, bool) {
	c.mu.Lock()
	e, ok := c.entries[k]
	c.mu.Unlock()
	if !ok || e.gen != gen {
		var zero V
		return zero, false
	}
	return e.v, true
}

// Peek returns the value cached for k and the generation it was read in,
// whatever the generation is now: for a caller that checks the generation
// later, as redisstore's commit script does for a start.
func (c *Cache[K, G, V]) Peek(k K) (V, G, bool) {
	c.mu.Lock()
	e, ok := c.entries[k]
	c.mu.Unlock()
	return e.v, e.gen, ok
}

// Put caches v for k, read in generation gen. The caller takes gen before
// it reads v (or reads both in one step), so that v is never older than
// its tag.
func (c *Cache[K, G, V]) Put(k K, gen G, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.entries == nil {
		c.entries = map[K]entry[G, V]{}
	}
	c.entries[k] = entry[G, V]{gen: gen, v: v}
}

// Observe notes that the generation is gen now. When gen is not the one
// observed last, every entry is dropped, whatever its tag: those of other
// generations could not be used at gen any more, and dropping them keeps
// entries of deleted names and old versions from accumulating (the few
// already read in gen are read again).
func (c *Cache[K, G, V]) Observe(gen G) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen != c.gen {
		clear(c.entries)
		c.gen = gen
	}
}
