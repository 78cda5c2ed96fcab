package node

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weftworks/weft/host/weft"
	"github.com/weftworks/weft/plugins"
)

// PluginModule returns the module bytes of a version the plugin name
// keeps (its current version or one in its history, weft.Plugin.Versions),
// so that a recorded attempt can be bundled with the module that ran it
// and replayed offline (weft attempt export) without the operator
// supplying the module.
//
// # Errors
//
//   - No such plugin, or a version it does not keep: an error matching
//     weft.ErrNotFound that names the plugin and the version.
//   - A kept version whose blob is missing from the blob store, or whose
//     bytes do not hash to the version (a corrupt blob): an error that
//     says so, which does not match weft.ErrNotFound (the version exists;
//     the host lost its module).
//   - Store and blob store errors, wrapped.
func (n *Node) PluginModule(ctx context.Context, name, version string) ([]byte, error) {
	p, err := n.store.GetPlugin(ctx, name)
	if errors.Is(err, weft.ErrNotFound) {
		return nil, fmt.Errorf("node: no plugin %s (asked for the module of its version %s): %w", name, version, weft.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("node: module of plugin %s version %s: reading the plugin: %w", name, version, err)
	}
	kept := p.Current.Version == version || slices.ContainsFunc(p.Versions, func(r weft.PluginRecord) bool { return r.Version == version })
	if !kept {
		return nil, fmt.Errorf("node: plugin %s keeps no version %s (neither its current one nor one in its history): %w", name, version, weft.ErrNotFound)
	}
	wasm, err := n.rt.ModuleBytes(ctx, version)
	switch {
	case errors.Is(err, plugins.ErrNotFound):
		// %v, not %w: the version is kept, its module is lost, which is
		// not a 404 for a caller that asked for a version that exists.
		return nil, fmt.Errorf("node: module of plugin %s version %s: the version is kept but its module is missing from the blob store (%v)", name, version, err)
	case err != nil:
		return nil, fmt.Errorf("node: module of plugin %s version %s: %w", name, version, err)
	}
	return wasm, nil
}
