package node

import (
	"context"

	"github.com/weftworks/weft/host/weft"
)

// CheckDefinition parses and validates a definition's source without
// saving it, and returns it as SaveDefinition would save it, without a
// version: its name, the hash of its canonical form and its source.
func (n *Node) CheckDefinition(ctx context.Context, source []byte) (*weft.Definition, error) {
	def, err := n.engine.CheckDefinition(ctx, source)
	if err != nil {
		return nil, err
	}
	return &weft.Definition{Name: def.Name, Hash: def.Hash(), Source: source}, nil
}

// SaveDefinition validates a definition's source and saves it as the
// workflow's next version; created is false when it equals the latest.
func (n *Node) SaveDefinition(ctx context.Context, source []byte) (d *weft.Definition, created bool, err error) {
	return n.engine.SaveDefinition(ctx, source)
}

// Definitions returns a page of the workflows, the latest version of
// each, and the cursor of the next page.
func (n *Node) Definitions(ctx context.Context, cursor string, limit int) ([]weft.Definition, string, error) {
	return n.store.ListDefinitions(ctx, cursor, limit)
}

// Definition returns a version of a workflow's definition (0: the
// latest), or an error matching weft.ErrNotFound.
func (n *Node) Definition(ctx context.Context, name string, version int) (*weft.Definition, error) {
	return n.store.GetDefinition(ctx, name, version)
}

// DefinitionVersions returns the versions kept of a workflow.
func (n *Node) DefinitionVersions(ctx context.Context, name string) ([]weft.Definition, error) {
	return n.store.ListDefinitionVersions(ctx, name)
}

// DeleteDefinition removes every version of a workflow, through the
// engine as SaveDefinition saves them.
func (n *Node) DeleteDefinition(ctx context.Context, name string) error {
	return n.engine.DeleteDefinition(ctx, name)
}
