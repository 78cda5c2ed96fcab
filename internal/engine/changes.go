package engine

import "sync"

// Telling the node's watchers (the API's event streams) which instances
// changed.

// changes is the registry of OnChange's functions.
type changes struct {
	mu   sync.RWMutex
	next uint64
	fns  map[uint64]func(id string)
}

// OnChange calls fn with the id of each instance that changes: on this
// node, at its creation, at each commit of its state and at its deletion;
// in a cluster, also when another node reports it suspended or finished
// (other nodes' starts and steps are not reported: a watcher that must
// see them reads the store again from time to time). fn is called on the
// goroutine that made the change, possibly under the instance's lock, so
// it must return at once: hand the id over, do not read the store. The
// calls stop when stop returns.
func (e *Engine) OnChange(fn func(id string)) (stop func()) {
	c := &e.changes
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.fns == nil {
		c.fns = map[uint64]func(string){}
	}
	c.next++
	id := c.next
	c.fns[id] = fn
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		delete(c.fns, id)
	}
}

// changed tells OnChange's functions that instance id changed.
func (e *Engine) changed(id string) {
	c := &e.changes
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, fn := range c.fns {
		fn(id)
	}
}

// ChangesComplete reports whether OnChange reports every change of every
// instance: true on a node alone (embedded mode), false in a cluster,
// where another node's starts and steps are not reported.
func (e *Engine) ChangesComplete() bool { return e.cfg.Bus == nil }
