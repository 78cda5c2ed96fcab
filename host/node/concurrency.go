package node

import (
	"context"

	"github.com/weftworks/weft/host/weft"
)

// ConcurrencyKeys returns a page of the concurrency keys that have running
// or waiting instances (docs/flow-control.md), of workflow, or, when it is
// empty, the activity steps' keys and then every workflow's, ordered by
// workflow and key, and the cursor of the next page.
func (n *Node) ConcurrencyKeys(ctx context.Context, workflow, cursor string, limit int) ([]weft.ConcurrencyKey, string, error) {
	return n.engine.ConcurrencyKeys(ctx, workflow, cursor, limit)
}

// ConcurrencyKey returns one concurrency key of a workflow and a page of
// the instances waiting for its slots, first in line first, with the
// cursor of the next page; an error matching weft.ErrNotFound when nothing
// runs or waits under the key.
func (n *Node) ConcurrencyKey(ctx context.Context, workflow, key, cursor string, limit int) (*weft.ConcurrencyKey, []weft.SlotWaiter, string, error) {
	return n.engine.ConcurrencyLine(ctx, workflow, key, cursor, limit)
}

// StepConcurrencyKey is ConcurrencyKey for a key of the activity steps'
// concurrency limits: its line holds attempts, each shown as its
// instance.
func (n *Node) StepConcurrencyKey(ctx context.Context, key, cursor string, limit int) (*weft.ConcurrencyKey, []weft.SlotWaiter, string, error) {
	return n.engine.StepConcurrencyLine(ctx, key, cursor, limit)
}
