package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins/grant"
)

// grantCache keeps the parsed grants of each plugin name by revision. The
// store is read at every attempt that needs the grants (when its guest
// first does: call.Call.LoadGrants), so that a grant changed through
// any node applies to the next attempt on every node; only the parse is
// saved.
type grantCache struct {
	mu     sync.Mutex
	parsed map[string]parsedGrants
}

type parsedGrants struct {
	revision uint64
	set      *grant.Set
}

// grants returns what is granted to plugin now: nil when nothing is.
func (e *Engine) grants(ctx context.Context, plugin string) (*grant.Set, error) {
	g, err := e.store.GetGrants(ctx, plugin)
	if errors.Is(err, weft.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the grants of plugin %s: %w", plugin, err)
	}
	c := &e.grantCache
	c.mu.Lock()
	p, ok := c.parsed[plugin]
	c.mu.Unlock()
	if ok && p.revision == g.Revision {
		return p.set, nil
	}
	set, err := grant.Parse(g.Document)
	if err != nil {
		// Stored by a node that checked it: corrupt, or written by a
		// newer version of the host with fields this one does not know.
		return nil, fmt.Errorf("the stored grants of plugin %s (revision %d): %w", plugin, g.Revision, err)
	}
	c.mu.Lock()
	if c.parsed == nil {
		c.parsed = map[string]parsedGrants{}
	}
	c.parsed[plugin] = parsedGrants{revision: g.Revision, set: set}
	c.mu.Unlock()
	return set, nil
}
