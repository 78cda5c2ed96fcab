package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"

	"github.com/weftworks/weft/host/node"
	"github.com/weftworks/weft/host/weft"
)

// applyGrants stores the grants of grants_file, plugin by plugin. An
// unchanged document keeps its revision, so that a restart changes
// nothing.
func applyGrants(ctx context.Context, n *node.Node, file string, grants map[string][]byte, log *slog.Logger) error {
	var changed, unchanged []string
	for _, name := range slices.Sorted(maps.Keys(grants)) {
		_, ok, err := n.PutGrants(ctx, name, grants[name], weft.AnyRevision)
		if err != nil {
			return fmt.Errorf("grants_file %s: plugin %s: %w", file, name, err)
		}
		if ok {
			changed = append(changed, name)
		} else {
			unchanged = append(unchanged, name)
		}
	}
	log.Info("grants_file applied", "file", file, "changed", strings.Join(changed, ","), "unchanged", strings.Join(unchanged, ","))
	return nil
}
