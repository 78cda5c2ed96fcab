package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/weftworks/weft/abi"
	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins/grant"
)

// PutGrants checks a grant document and stores it, in canonical form, as
// everything granted to the plugin name, replacing what was granted
// before, and reports whether that changed anything (an equal document
// keeps its revision). The plugin need not be uploaded yet. Every node
// uses the new grants from the next activity call it starts.
//
// Unless ifRevision is weft.AnyRevision, it stores the document only if
// the grants are still at that revision (0: nothing granted), and fails
// with a *weft.GrantsConflictError otherwise: an edit of what was read
// never undoes a change made since, such as a revoke.
//
// It fails with an error matching ErrInvalidName for a bad name and
// grant.ErrInvalid for a bad document.
func (n *Node) PutGrants(ctx context.Context, plugin string, doc []byte, ifRevision uint64) (g *weft.Grants, changed bool, err error) {
	if !abi.ValidName(plugin) {
		return nil, false, fmt.Errorf("node: plugin name %q: %w: 1 to %d characters from a-z, 0-9, '_' and '-', starting with a letter",
			plugin, ErrInvalidName, abi.MaxNameLen)
	}
	set, err := grant.Parse(doc)
	if err != nil {
		return nil, false, fmt.Errorf("node: grants of plugin %s: %w", plugin, err)
	}
	canon, err := json.Marshal(set)
	if err != nil {
		return nil, false, fmt.Errorf("node: grants of plugin %s: %w", plugin, err)
	}
	old, err := n.store.GetGrants(ctx, plugin)
	switch {
	case err == nil && bytes.Equal(old.Document, canon) && (ifRevision == weft.AnyRevision || ifRevision == old.Revision):
		return old, false, nil // the store would keep its revision too
	case err != nil && !errors.Is(err, weft.ErrNotFound):
		return nil, false, fmt.Errorf("node: reading the grants of plugin %s: %w", plugin, err)
	}
	if _, err := n.store.PutGrants(ctx, plugin, canon, ifRevision); err != nil {
		return nil, false, fmt.Errorf("node: storing the grants of plugin %s: %w", plugin, err)
	}
	if g, err = n.store.GetGrants(ctx, plugin); err != nil {
		return nil, false, fmt.Errorf("node: reading the grants of plugin %s back: %w", plugin, err)
	}
	// What is granted, never a secret's value: there is none to log.
	n.log.Info("plugin grants stored", "plugin", plugin, "revision", g.Revision,
		"hosts", len(set.Hosts), "config", len(set.Config), "secrets", len(set.Secrets))
	return g, true, nil
}

// GetGrants returns the grants of a plugin name, or an error matching
// weft.ErrNotFound.
func (n *Node) GetGrants(ctx context.Context, plugin string) (*weft.Grants, error) {
	return n.store.GetGrants(ctx, plugin)
}

// DeleteGrants revokes everything granted to a plugin name: its next
// activity calls can reach no host and read no configuration or secret.
// It fails with weft.ErrNotFound when nothing was granted.
func (n *Node) DeleteGrants(ctx context.Context, plugin string) error {
	if err := n.store.DeleteGrants(ctx, plugin); err != nil {
		return err
	}
	n.log.Info("plugin grants revoked", "plugin", plugin)
	return nil
}
