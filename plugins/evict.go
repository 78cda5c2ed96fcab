package plugins

import (
	"context"
	"slices"
	"time"
)

// pools returns the pools of the loaded versions.
func (r *Runtime) pools() []*pool {
	r.mu.Lock()
	defer r.mu.Unlock()
	pools := make([]*pool, 0, len(r.loaded))
	for _, l := range r.loaded {
		select {
		case <-l.ready:
			if l.p != nil {
				pools = append(pools, l.p.pool)
			}
		default:
		}
	}
	return pools
}

// evictIdle closes idle instances of any version, least recently used
// first, until their memories add up to need bytes or none is left. It
// reports whether it closed any.
func (r *Runtime) evictIdle(need int64) bool {
	var idle []*instance
	for _, p := range r.pools() {
		idle = p.takeIdle(idle)
	}
	slices.SortFunc(idle, func(a, b *instance) int { return a.lastUsed.Compare(b.lastUsed) })
	// Choose, then give the others back before closing anything: while
	// they are out of their pools, a caller would create a new instance.
	var freed int64
	n := 0
	for _, in := range idle {
		if freed >= need {
			break
		}
		freed += int64(in.mem.Size())
		n++
	}
	for _, in := range idle[n:] {
		in.pool.restore(in)
	}
	for _, in := range idle[:n] {
		in.pool.evict(in)
	}
	if freed > 0 {
		r.log.Info("plugins: closed idle instances to stay within the memory budget", "freed_bytes", freed, "needed_bytes", need)
	}
	return freed > 0
}

// expireIdle closes instances idle for longer than IdleTimeout, until
// stop is closed.
func (r *Runtime) expireIdle(stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(max(r.cfg.IdleTimeout/4, 10*time.Millisecond))
	defer t.Stop()
	var idle []*instance
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		cutoff := r.cfg.Now().Add(-r.cfg.IdleTimeout)
		for _, p := range r.pools() {
			idle = p.takeIdle(idle[:0])
			for _, in := range idle {
				if in.lastUsed.Before(cutoff) {
					p.evict(in)
				} else {
					p.restore(in)
				}
			}
		}
	}
}

// acquireCompile waits for a turn to compile: at most MaxCompiles at once.
func (r *Runtime) acquireCompile(ctx context.Context) (release func(), err error) {
	select {
	case r.compiles <- struct{}{}:
		return func() { <-r.compiles }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
