package node

import "context"

// HeldStartsUpTo is HeldStarts reading at most limit pending instances,
// so that a test reaches the bound with a few.
func (n *Node) HeldStartsUpTo(ctx context.Context, workflow string, limit int) (int, bool, error) {
	return n.heldStarts(ctx, workflow, limit)
}
